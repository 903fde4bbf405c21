"""Regions in a claims folder laid out as the DRA driver lays them out, copied from the files
the real libvgpu.so wrote (../shared/fixtures/hami-core, read there, never committed here)."""

from __future__ import annotations

import shutil
import struct
import uuid
from pathlib import Path

import pytest

from tests.monitor.cluster_pods import (  # noqa: F401 (fixtures of these tests)
    device_class,
    gpu_namespace,
)
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


def claim_region(
    root: Path,
    claim_uid: str,
    gpu_uuid: str,
    *,
    pid: int,
    hostpid: int,
    priority: int = 1,
    recent_kernel: int = 2,
    switch: int = 1,
) -> Path:
    """A region of one process on one card, as libvgpu.so writes it in a claim's folder: the
    fixture `a-one-process-running` (1 GiB limit, 544 MiB used, 37% SM) with the card's UUID,
    the process's PIDs and the feedback fields given (a test plays libvgpu.so's part)."""
    from hami_dra_webhook.core.region import layout

    _, path = place(root, "a-one-process-running", claim_uid)
    with path.open("r+b") as handle:
        handle.seek(layout.UUIDS_AT)
        handle.write(gpu_uuid.encode().ljust(layout.UUID_SIZE, b"\0"))
        for offset, value in (
            (layout.slot_at(0) + layout.SLOT_PID_AT, pid),
            (layout.slot_at(0) + layout.SLOT_HOSTPID_AT, hostpid),
            (layout.PRIORITY_AT, priority),
            (layout.RECENT_KERNEL_AT, recent_kernel),
            (layout.SWITCH_AT, switch),
        ):
            handle.seek(offset)
            handle.write(struct.pack("<i", value))
    return path


def fields(path: Path) -> tuple[int, int]:
    """(recent_kernel, utilization_switch) as the file holds them now."""
    from hami_dra_webhook.core.region import layout

    with path.open("rb") as handle:
        handle.seek(layout.SWITCH_AT)
        switch, recent = struct.unpack("<ii", handle.read(8))
    return recent, switch


def poke(path: Path, offset: int, value: int) -> None:
    with path.open("r+b") as handle:
        handle.seek(offset)
        handle.write(struct.pack("<i", value))


@pytest.fixture
def namespace(request: pytest.FixtureRequest) -> str:
    """The test's namespace on the shared control plane (its pods and claims deleted after)."""
    return str(request.getfixturevalue("gpu_namespace"))
