"""The claims folder on the node, read as hostile ground: `<root>/<claim UID>/<uuid>.cache`,
written by the DRA driver (the folders) and by the tenant's processes (the files, and whatever
else they put in their folder: it is mounted read-write into their containers). Nothing here
follows a link, holds a mapping a tenant could truncate under us (SIGBUS), or reads more than a
region's bytes; what does not hold up is skipped with a reason."""

from __future__ import annotations

import os
import re
import stat
import struct
from dataclasses import dataclass
from pathlib import Path

from hami_dra_webhook.core.region import layout
from hami_dra_webhook.core.region.decode import (
    Region,
    Slot,
    Unreadable,
    decode_header,
    decode_slot,
)

MAX_CLAIMS = 4096  # claim folders read on one node; more is not a node (counted, skipped)
MAX_ENTRIES = 64  # entries looked at in one claim's folder (the tenant's to fill)
SLACK = 4096  # a region file is REGION_SIZE + 1 bytes; more than this past it is not one
SEQLOCK_TRIES = 3

# Reasons a claim's region is not read, beside core.region.decode's.
NOT_A_FILE = "not-a-file"  # a link, a folder, a device...
LINKED = "hard-linked"
OVERSIZED = "oversized"
TOO_MANY_ENTRIES = "too-many-entries"
SEVERAL_REGIONS = "several-regions"
UNREADABLE_FILE = "io-error"
CHANGED = "changed-while-read"

_CLAIM_UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_I32 = struct.Struct("<i")


@dataclass(frozen=True, slots=True)
class Identity:
    """Which file was read: a write goes only to the same one."""

    claim_uid: str
    name: str
    device: int
    inode: int


@dataclass(frozen=True, slots=True)
class Read:
    identity: Identity
    region: Region
    unsettled: int  # slots whose seqlock stayed odd (their memory read as it was)


@dataclass(frozen=True, slots=True)
class Skipped:
    claim_uid: str
    reason: str
    detail: str


@dataclass(frozen=True, slots=True)
class Listing:
    claims: list[str]  # claim UIDs, sorted
    ignored: int  # entries of the root that are not a claim folder, or past MAX_CLAIMS


def list_claims(root: Path) -> Listing:
    """The claim folders under `root` (a missing root is an empty node)."""
    try:
        entries = os.scandir(root)
    except FileNotFoundError:
        return Listing([], 0)
    claims: list[str] = []
    ignored = 0
    with entries:
        for entry in entries:
            if (
                len(claims) < MAX_CLAIMS
                and _CLAIM_UID.fullmatch(entry.name)
                and entry.is_dir(follow_symlinks=False)
            ):
                claims.append(entry.name)
            else:
                ignored += 1
    return Listing(sorted(claims), ignored)


def read_claim(root: Path, claim_uid: str) -> Read | Skipped | None:
    """The region of one claim; None when the folder holds none yet (no CUDA process started)."""
    try:
        folder = os.open(root / claim_uid, _FOLDER)
    except FileNotFoundError:
        return None  # unprepared between the listing and now
    except OSError as error:
        return Skipped(claim_uid, NOT_A_FILE, f"the claim's folder: {error.strerror}")
    try:
        names = _region_names(folder)
        if isinstance(names, Skipped):
            return Skipped(claim_uid, names.reason, names.detail)
        found: list[Read] = []
        skipped: Skipped | None = None
        for name in names:
            result = _read_file(folder, claim_uid, name)
            if isinstance(result, Read):
                found.append(result)
            else:
                skipped = skipped or result
        if len(found) > 1:
            return Skipped(claim_uid, SEVERAL_REGIONS, f"{len(found)} initialized regions")
        return found[0] if found else skipped
    finally:
        os.close(folder)


def _region_names(folder: int) -> list[str] | Skipped:
    names: list[str] = []
    with os.scandir(folder) as entries:
        for seen, entry in enumerate(entries):
            if seen >= MAX_ENTRIES:
                return Skipped("", TOO_MANY_ENTRIES, f"more than {MAX_ENTRIES} entries")
            if entry.name.endswith(".cache"):
                names.append(entry.name)
    return sorted(names)


def _read_file(folder: int, claim_uid: str, name: str) -> Read | Skipped:
    try:
        fd = os.open(name, _OPEN, dir_fd=folder)
    except OSError as error:  # ELOOP: a symbolic link
        return Skipped(claim_uid, NOT_A_FILE, f"{name}: {error.strerror}")
    try:
        return _read_region(fd, Identity(claim_uid, name, 0, 0))
    except OSError as error:
        return Skipped(claim_uid, UNREADABLE_FILE, f"{name}: {error.strerror}")
    finally:
        os.close(fd)


def _read_region(fd: int, where: Identity) -> Read | Skipped:
    info = os.fstat(fd)
    identity = Identity(where.claim_uid, where.name, info.st_dev, info.st_ino)
    if not stat.S_ISREG(info.st_mode):
        return Skipped(where.claim_uid, NOT_A_FILE, f"{where.name}: not a regular file")
    if info.st_nlink != 1:
        return Skipped(where.claim_uid, LINKED, f"{where.name}: {info.st_nlink} links")
    if info.st_size > layout.REGION_SIZE + SLACK:
        return Skipped(where.claim_uid, OVERSIZED, f"{where.name}: {info.st_size} bytes")
    head = os.pread(fd, layout.HEADER_SIZE, 0)
    tail = os.pread(fd, layout.TAIL_SIZE, layout.TAIL_AT)
    header = decode_header(head, tail, info.st_size)
    if isinstance(header, Unreadable):
        return Skipped(where.claim_uid, header.reason, f"{where.name}: {header.detail}")
    block = os.pread(fd, layout.SLOT_SIZE * header.proc_num, layout.SLOTS_AT)
    if len(block) < layout.SLOT_SIZE * header.proc_num:
        return Skipped(where.claim_uid, CHANGED, f"{where.name}: truncated while read")
    slots: list[Slot] = []
    unsettled = 0
    for index in range(header.proc_num):
        data = block[index * layout.SLOT_SIZE : (index + 1) * layout.SLOT_SIZE]
        slot = decode_slot(index, data, header.device_count)
        if slot.status != 0 and slot.seqlock % 2:
            slot, settled = _settled(fd, index, header.device_count, slot)
            unsettled += not settled
        slots.append(slot)
    return Read(identity, Region(header, tuple(slots)), unsettled)


def _settled(fd: int, index: int, devices: int, slot: Slot) -> tuple[Slot, bool]:
    """A slot read again while its owner was writing its memory (seqlock odd): a few tries,
    then the last reading (HAMi's monitor ignores the seqlock altogether)."""
    for _ in range(SEQLOCK_TRIES):
        data = os.pread(fd, layout.SLOT_SIZE, layout.slot_at(index))
        if len(data) < layout.SLOT_SIZE:
            return slot, False
        slot = decode_slot(index, data, devices)
        if slot.seqlock % 2 == 0:
            return slot, True
    return slot, False


def write_fields(
    root: Path, identity: Identity, recent_kernel: int | None, utilization_switch: int | None
) -> bool:
    """The feedback loop's two int32 stores, into the file that was read (same inode), as
    aligned 4-byte writes (HAMi's monitor stores them atomically through its mapping). False:
    the file is not that one any more, or is not a region's size."""
    try:
        folder = os.open(root / identity.claim_uid, _FOLDER)
    except OSError:
        return False
    try:
        fd = os.open(
            identity.name, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder
        )
    except OSError:
        return False
    finally:
        os.close(folder)
    try:
        info = os.fstat(fd)
        same = (info.st_dev, info.st_ino) == (identity.device, identity.inode)
        if not same or not stat.S_ISREG(info.st_mode) or info.st_size < layout.REGION_SIZE:
            return False
        if recent_kernel is not None:
            os.pwrite(fd, _I32.pack(recent_kernel), layout.RECENT_KERNEL_AT)
        if utilization_switch is not None:
            os.pwrite(fd, _I32.pack(utilization_switch), layout.SWITCH_AT)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
