"""Regions in a claims folder laid out as the DRA driver lays them out, copied from the files
the real libvgpu.so wrote (../shared/fixtures/hami-core, read there, never committed here)."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from tests.support.shared import shared_path

FIXTURES = ("fixtures", "hami-core")


def fixture(name: str) -> Path:
    return shared_path(*FIXTURES, f"{name}.cache", what="HAMi-core regions written by libvgpu.so")


def place(root: Path, name: str, claim_uid: str | None = None) -> tuple[str, Path]:
    """A copy of fixture `name` as a claim's region: `<root>/<claim UID>/<random uuid>.cache`."""
    claim_uid = claim_uid or str(uuid.uuid4())
    folder = root / claim_uid
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{uuid.uuid4()}.cache"
    shutil.copyfile(fixture(name), path)
    return claim_uid, path
