"""Regions as a tenant can write them (the file is mapped writable into the container, and the
claim's folder is mounted read-write): each is skipped with its reason, never an exception, and
never read as another claim's."""

from __future__ import annotations

import os
import struct
import threading
import uuid
from pathlib import Path

import pytest

from hami_dra_webhook.core.region import layout
from hami_dra_webhook.core.region.usage import unknown, usage
from hami_dra_webhook.monitor import region_files
from hami_dra_webhook.monitor.region_files import (
    Read,
    Skipped,
    list_claims,
    read_claim,
    write_fields,
)
from tests.monitor.conftest import fixture, place


def _poke(path: Path, offset: int, fmt: str, value: int) -> None:
    with path.open("r+b") as handle:
        handle.seek(offset)
        handle.write(struct.pack(fmt, value))


def _skipped(root: Path, claim: str) -> Skipped:
    result = read_claim(root, claim)
    assert isinstance(result, Skipped), result
    return result


@pytest.mark.parametrize(
    ("offset", "fmt", "value", "reason"),
    [
        (layout.MAGIC_AT, "<i", 0, "not-initialized"),
        (layout.MAGIC_AT, "<i", 19920719, "not-initialized"),
        (layout.MAJOR_AT, "<I", 2, "version"),
        (layout.DEVICE_NUM_AT, "<Q", 17, "device-count"),
        (layout.DEVICE_NUM_AT, "<Q", 2**64 - 1, "device-count"),
        (layout.PROC_NUM_AT, "<i", 1025, "process-count"),
        (layout.PROC_NUM_AT, "<i", -1, "process-count"),
    ],
)
def test_a_forged_header_is_skipped(
    tmp_path: Path, offset: int, fmt: str, value: int, reason: str
) -> None:
    claim, path = place(tmp_path, "a-one-process-running")
    _poke(path, offset, fmt, value)
    assert _skipped(tmp_path, claim).reason == reason


@pytest.mark.parametrize("size", [0, 11, layout.HEADER_SIZE, layout.REGION_SIZE - 1])
def test_a_truncated_region_is_skipped(tmp_path: Path, size: int) -> None:
    claim, path = place(tmp_path, "a-one-process-running")
    os.truncate(path, size)
    assert _skipped(tmp_path, claim).reason == "too-small"


def test_an_oversized_file_is_skipped(tmp_path: Path) -> None:
    claim, path = place(tmp_path, "a-one-process-running")
    os.truncate(path, 1 << 40)  # sparse: a terabyte that costs nothing to write
    assert _skipped(tmp_path, claim).reason == "oversized"


def test_the_largest_counts_a_region_may_hold_are_read_within_bounds(tmp_path: Path) -> None:
    claim, path = place(tmp_path, "a-one-process-running")
    _poke(path, layout.DEVICE_NUM_AT, "<Q", 16)
    _poke(path, layout.PROC_NUM_AT, "<i", 1024)
    read = read_claim(tmp_path, claim)
    assert isinstance(read, Read)
    assert len(read.region.slots) == 1024
    assert read.region.header.uuids[1:] == (None,) * 15  # unset names are no device
    assert [d.index for d in usage(read.region, unknown).devices] == [0]


def test_a_garbled_device_name_is_no_device(tmp_path: Path) -> None:
    claim, path = place(tmp_path, "a-one-process-running")
    with path.open("r+b") as handle:
        handle.seek(layout.UUIDS_AT)
        handle.write(b"GPU-\xff\xfe" + b"A" * 90)  # not ASCII, not NUL-terminated
    read = read_claim(tmp_path, claim)
    assert isinstance(read, Read) and read.region.header.uuids == (None,)
    assert usage(read.region, unknown).devices == ()


def test_a_link_to_another_claims_region_is_not_followed(tmp_path: Path) -> None:
    victim, victim_file = place(tmp_path, "b-two-processes-running")
    tenant = str(uuid.uuid4())
    (tmp_path / tenant).mkdir()
    (tmp_path / tenant / "mine.cache").symlink_to(victim_file)  # absolute, as inside a container
    assert _skipped(tmp_path, tenant).reason == "not-a-file"
    (tmp_path / tenant / "mine.cache").unlink()
    (tmp_path / tenant / "mine.cache").symlink_to(f"../{victim}/{victim_file.name}")
    assert _skipped(tmp_path, tenant).reason == "not-a-file"


def test_a_link_out_of_the_root_is_not_followed(tmp_path: Path) -> None:
    root = tmp_path / "claims"
    root.mkdir()
    outside = tmp_path / "outside.cache"
    outside.write_bytes(fixture("a-one-process-running").read_bytes())
    claim = str(uuid.uuid4())
    (root / claim).symlink_to(tmp_path)  # a claim "folder" that is a link
    assert list_claims(root).claims == [] and list_claims(root).ignored == 1
    (root / claim).unlink()
    (root / claim).mkdir()
    (root / claim / "x.cache").symlink_to(outside)
    assert _skipped(root, claim).reason == "not-a-file"


def test_a_hard_link_a_fifo_and_a_folder_are_not_regions(tmp_path: Path) -> None:
    claim, path = place(tmp_path, "a-one-process-running")
    os.link(path, tmp_path / claim / "second.cache")
    assert _skipped(tmp_path, claim).reason == "hard-linked"
    other = str(uuid.uuid4())
    (tmp_path / other).mkdir()
    os.mkfifo(tmp_path / other / "pipe.cache")
    assert _skipped(tmp_path, other).reason == "not-a-file"  # opened without blocking
    (tmp_path / other / "pipe.cache").unlink()
    (tmp_path / other / "dir.cache").mkdir()
    assert _skipped(tmp_path, other).reason == "not-a-file"


def test_ten_thousand_files_in_a_claims_folder(tmp_path: Path) -> None:
    claim, _ = place(tmp_path, "a-one-process-running")
    for index in range(10_000):
        (tmp_path / claim / f"{index}.cache").touch()
    assert _skipped(tmp_path, claim).reason == "too-many-entries"


def test_ten_thousand_claim_folders_are_bounded(tmp_path: Path) -> None:
    for index in range(region_files.MAX_CLAIMS + 10):
        (tmp_path / str(uuid.UUID(int=index))).mkdir()
    (tmp_path / "not-a-claim").mkdir()
    listing = list_claims(tmp_path)
    assert len(listing.claims) == region_files.MAX_CLAIMS and listing.ignored == 11


def test_two_initialized_regions_in_one_folder_are_ambiguous(tmp_path: Path) -> None:
    claim, _ = place(tmp_path, "a-one-process-running")
    place(tmp_path, "b-two-processes-running", claim)
    assert _skipped(tmp_path, claim).reason == "several-regions"


def test_an_odd_seqlock_is_read_again_then_taken_as_it_is(tmp_path: Path) -> None:
    claim, path = place(tmp_path, "a-one-process-running")
    _poke(path, layout.slot_at(0) + layout.SLOT_SEQLOCK_AT, "<Q", 7)
    read = read_claim(tmp_path, claim)
    assert isinstance(read, Read) and read.unsettled == 1


def test_a_region_that_changes_while_read(tmp_path: Path) -> None:
    """A writer that truncates, garbles and restores the file as fast as it can, while the
    reader reads it 300 times: each read is a region or a skip, never an exception."""
    claim, path = place(tmp_path, "b-two-processes-running")
    good = path.read_bytes()
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            os.truncate(path, 100)
            with path.open("r+b") as handle:
                handle.write(good)
            _poke(path, layout.PROC_NUM_AT, "<i", 5000)
            _poke(path, layout.PROC_NUM_AT, "<i", 2)

    writer = threading.Thread(target=churn)
    writer.start()
    outcomes: set[str] = set()
    try:
        for _ in range(300):
            result = read_claim(tmp_path, claim)
            outcomes.add(
                type(result).__name__ if not isinstance(result, Skipped) else result.reason
            )
    finally:
        stop.set()
        writer.join()
    assert outcomes <= {
        "Read",
        "too-small",
        "process-count",
        "not-initialized",
        "changed-while-read",
    }
    assert "Read" in outcomes or len(outcomes) > 1, outcomes


def test_a_write_goes_only_to_the_file_that_was_read(tmp_path: Path) -> None:
    claim, path = place(tmp_path, "a-one-process-running")
    read = read_claim(tmp_path, claim)
    assert isinstance(read, Read)
    path.rename(tmp_path / "kept.cache")  # kept: its inode is not given to the new file
    replacement = tmp_path / claim / path.name
    replacement.write_bytes(fixture("a-one-process-running").read_bytes())
    assert write_fields(tmp_path, read.identity, -1, 0) is False
    again = read_claim(tmp_path, claim)
    assert isinstance(again, Read) and again.region.header.recent_kernel == 2
    replacement.unlink()
    replacement.symlink_to(tmp_path / "elsewhere.cache")
    assert write_fields(tmp_path, read.identity, -1, 0) is False
    assert not (tmp_path / "elsewhere.cache").exists()


def test_an_empty_folder_and_a_missing_root(tmp_path: Path) -> None:
    claim = str(uuid.uuid4())
    (tmp_path / claim).mkdir()
    assert read_claim(tmp_path, claim) is None  # no CUDA process yet
    assert list_claims(tmp_path / "absent").claims == []
