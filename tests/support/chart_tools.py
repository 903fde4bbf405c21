"""The real helm binary (fetched by tests/support/tools.py) and rendering helpers."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.support.tools import tool

ROOT = Path(__file__).parents[2]
CHART = ROOT / "charts" / "hami-dra-webhook"


def helm() -> str:
    return tool("helm")


def run_helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm(), *args], capture_output=True, text=True, check=False)


def render(
    *sets: str, namespace: str = "hami-system", release: str = "hami-dra-webhook"
) -> list[dict[str, Any]]:
    args = ["template", release, str(CHART), "--namespace", namespace]
    for item in sets:
        args += ["--set", item]
    result = run_helm(*args)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def render_text(*sets: str) -> str:
    args = ["template", "hami-dra-webhook", str(CHART), "--namespace", "hami-system"]
    for item in sets:
        args += ["--set", item]
    result = run_helm(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def find(documents: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    matches = [
        d
        for d in documents
        if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)
    ]
    assert len(matches) == 1, f"{len(matches)} {kind} {name or ''}"
    return matches[0]
