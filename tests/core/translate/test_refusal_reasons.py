"""Every refusal carries a stable reason tag (issue 49): `reason` is a required argument of
`NotConvertible` and `Refusal` (mypy holds every call site to it), each tag is a literal in
kebab-case (or passed on from another refusal), and docs/translation.md lists exactly the tags
the code uses."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).parents[3]
PACKAGE = ROOT / "hami_dra_webhook"
TAG = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def refusal_sites() -> list[tuple[str, ast.Call]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in (
                "NotConvertible",
                "Refusal",
            ):
                found.append((f"{path.relative_to(ROOT)}:{node.lineno}", node))
    return found


def tags_in_code() -> set[str]:
    tags = set()
    for where, call in refusal_sites():
        reason = next((k.value for k in call.keywords if k.arg == "reason"), None)
        assert reason is not None, f"{where}: a refusal without a reason tag"
        if isinstance(reason, ast.Constant):
            assert isinstance(reason.value, str) and TAG.match(reason.value), where
            tags.add(reason.value)
        else:  # passed on: translate_pod's Refusal of a NotConvertible, a Volcano Job's
            assert isinstance(reason, ast.Attribute) and reason.attr == "reason", where
    return tags


def test_every_refusal_site_names_a_tag() -> None:
    assert len(refusal_sites()) >= 50
    assert len(tags_in_code()) >= 35


def test_the_docs_list_exactly_the_tags_in_use() -> None:
    text = (ROOT / "docs" / "translation.md").read_text()
    table = text.split("## Refusal reasons", 1)[1]
    documented = set(re.findall(r"^\| `([a-z0-9-]+)` \|", table, re.MULTILINE))
    assert documented == tags_in_code()
