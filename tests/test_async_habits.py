"""The package waits with `asyncio.timeout`, never `asyncio.wait_for`: on Python 3.11, which
the image runs, wait_for loses a cancellation that lands as its wait ends (gh-86296), and a
task cancelled that way goes on (a GPU quota worker cancelled with its Lease took a namespace:
tests/cluster/test_quota_work_in_process.py). A new wait_for would bring it back unseen."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / "hami_dra_webhook"


def test_the_package_never_waits_with_wait_for() -> None:
    found = []
    for module in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(module.read_text(), str(module))):
            if isinstance(node, ast.Attribute) and node.attr == "wait_for":
                found.append(f"{module.relative_to(PACKAGE.parent)}:{node.lineno}")
            if isinstance(node, ast.ImportFrom) and any(a.name == "wait_for" for a in node.names):
                found.append(f"{module.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert found == [], f"use `async with asyncio.timeout(...)` instead of wait_for: {found}"
