"""Print requirements-dev.lock: every package installed in this environment that is not the
project itself or in requirements.lock (the development tools and what they pull in), pinned.

    .venv/bin/python scripts/lock_dev.py > requirements-dev.lock
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEADER = """\
# The development tools' versions (pyproject.toml's dev extra and what they pull in), pinned:
# scripts/venv.sh installs them as constraints beside requirements.lock. Renew it on purpose:
#   .venv/bin/python scripts/lock_dev.py > requirements-dev.lock   (after upgrading a tool)"""
LEFT_OUT = {"hami-dra-webhook", "pip", "setuptools", "wheel"}


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def main() -> int:
    runtime = {
        normalized(line.split("==")[0])
        for line in (ROOT / "requirements.lock").read_text().splitlines()
        if re.match(r"^[A-Za-z0-9_.-]+==", line)
    }
    found = {normalized(dist.metadata["Name"]): dist.version for dist in metadata.distributions()}
    pinned = sorted(
        f"{name}=={version}"
        for name, version in found.items()
        if name not in runtime and name not in LEFT_OUT
    )
    print(HEADER)
    print("\n".join(pinned))
    return 0


if __name__ == "__main__":
    sys.exit(main())
