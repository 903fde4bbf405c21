"""The real helm binary (fetched by tests/support/tools.py) and rendering helpers."""

from __future__ import annotations

import copy
import functools
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
    """`helm template` of the chart with `sets`: a fresh copy of the documents (the chart does
    not change during a run, so each rendering is made once a process)."""
    return copy.deepcopy(_rendered(sets, namespace, release))


@functools.lru_cache(maxsize=256)
def _rendered(sets: tuple[str, ...], namespace: str, release: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(_template(sets, namespace, release)) if d]


@functools.lru_cache(maxsize=256)
def _template(sets: tuple[str, ...], namespace: str, release: str) -> str:
    args = ["template", release, str(CHART), "--namespace", namespace]
    for item in sets:
        args += ["--set", item]
    result = run_helm(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout


# The names of the chart's objects as render() makes them (release hami-dra-webhook).
RELEASE = "hami-dra-webhook"
DRIVER = f"{RELEASE}-driver"
MONITOR = f"{RELEASE}-monitor"


def render_text(*sets: str) -> str:
    return _template(sets, "hami-system", "hami-dra-webhook")


def find(documents: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    matches = [
        d
        for d in documents
        if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)
    ]
    assert len(matches) == 1, f"{len(matches)} {kind} {name or ''}"
    return matches[0]
