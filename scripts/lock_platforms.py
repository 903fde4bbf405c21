"""Does every package pinned in requirements.lock have a wheel, hashed in the lock, for each
platform the image is built for (linux/amd64 and linux/arm64, CPython 3.11)? The image's build
installs wheels only (`--only-binary=:all: --require-hashes`), so a missing one fails a
multi-arch build (docs/install.md) long after the lock was renewed. Asks PyPI's simple index, once
per lock: ./scripts/test runs it and keeps the answer in .venv.

    python scripts/lock_platforms.py requirements.lock
"""

from __future__ import annotations

import json
import re
import sys
import urllib.request
from pathlib import Path
from typing import Any

PLATFORMS = {"linux/amd64": ("x86_64",), "linux/arm64": ("aarch64",)}
PIN = re.compile(r"^([A-Za-z0-9_.-]+)==([^ \\]+)")
HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")


def pins(lock: str) -> dict[tuple[str, str], set[str]]:
    found: dict[tuple[str, str], set[str]] = {}
    current: tuple[str, str] | None = None
    for line in lock.splitlines():
        pin = PIN.match(line)
        if pin:
            current = (pin.group(1), pin.group(2))
            found[current] = set()
        if current is not None:
            found[current] |= set(HASH.findall(line))
    return found


def fits(filename: str, machines: tuple[str, ...]) -> bool:
    """A wheel CPython 3.11 on glibc Linux of that machine installs (tags as PEP 425 writes
    them, compressed sets split at dots)."""
    if not filename.endswith(".whl"):
        return False
    python, abi, platform = (tag.split(".") for tag in filename[:-4].split("-")[-3:])
    runs = any(p in ("py3", "cp311") for p in python) or (
        "abi3" in abi and any(p.startswith("cp3") and int(p[3:]) <= 11 for p in python)
    )
    if not runs:
        return False
    return "any" in platform or any(
        "manylinux" in tag and tag.endswith(machines) for tag in platform
    )


def index(name: str) -> list[dict[str, Any]]:
    """The package's files as PyPI's simple index lists them (PEP 691, JSON)."""
    request = urllib.request.Request(
        f"https://pypi.org/simple/{name}/",
        headers={"Accept": "application/vnd.pypi.simple.v1+json"},
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        files: list[dict[str, Any]] = json.load(answer)["files"]
    return files


def missing(lock: str) -> list[str]:
    problems = []
    for (name, version), hashes in sorted(pins(lock).items()):
        files = [f for f in index(name) if f["hashes"].get("sha256") in hashes]
        for platform, machines in PLATFORMS.items():
            if not any(fits(f["filename"], machines) for f in files):
                problems.append(f"{name}=={version}: no wheel hashed in the lock for {platform}")
    return problems


if __name__ == "__main__":
    problems = missing(Path(sys.argv[1]).read_text())
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    sys.exit(1 if problems else 0)
