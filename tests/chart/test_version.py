"""One version: pyproject.toml's. Everything else that states it must agree, and the changelog
must have its section."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

import hami_dra_webhook

ROOT = Path(__file__).parents[2]


def test_every_place_says_pyproject_version() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    chart = yaml.safe_load((ROOT / "charts" / "hami-dra-webhook" / "Chart.yaml").read_text())
    dockerfile = re.search(r"^ARG VERSION=(\S+)$", (ROOT / "Dockerfile").read_text(), re.M)
    stated = {
        "hami_dra_webhook.__version__": hami_dra_webhook.__version__,
        "Chart.yaml version": str(chart["version"]),
        "Chart.yaml appVersion": str(chart["appVersion"]),
        "Dockerfile ARG VERSION": dockerfile.group(1) if dockerfile else "(none)",
    }
    assert {place: v for place, v in stated.items() if v != version} == {}, version
    headings = re.findall(r"^## (\S+)", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert version in headings, f"CHANGELOG.md has no section for {version}"
