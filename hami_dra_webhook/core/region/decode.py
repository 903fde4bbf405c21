"""A region's bytes as values, read as a tenant's: the file is mapped writable into the
container, so every count is checked against its array, every index bounded, and a header that
does not hold up is refused with a reason (never an exception). What a slot says about its own
process is taken as written; whose the region is never comes from here."""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from hami_dra_webhook.core.region import layout

# The reasons a region is not read; each is a counter's label in the monitor.
TOO_SMALL = "too-small"
NOT_INITIALIZED = "not-initialized"
VERSION = "version"
DEVICE_COUNT = "device-count"
PROCESS_COUNT = "process-count"

# An NVML UUID as libvgpu.so copies it (`GPU-` and 36 characters; MIG devices `MIG-...`).
_UUID = re.compile(r"(?:GPU|MIG)-[0-9A-Za-z/-]{1,88}")
_I32 = struct.Struct("<i")
_U64 = struct.Struct("<Q")
_UUIDS = struct.Struct(f"<{layout.DEVICES * layout.UUID_SIZE}s")
_LIMITS = struct.Struct(f"<{layout.DEVICES}Q")
_TAIL = struct.Struct(
    "<iiiiQ"
)  # proc_num, utilization_switch, recent_kernel, priority, last_kernel
_MEMORY = struct.Struct("<5Q")


@dataclass(frozen=True, slots=True)
class Unreadable:
    reason: str  # one of the constants above
    detail: str


@dataclass(frozen=True, slots=True)
class Header:
    device_count: int  # device_num, 0..16
    uuids: tuple[str | None, ...]  # per device index; None: not a UUID (unset or garbled)
    limits: tuple[int, ...]  # bytes per device index, 0 = none
    sm_limits: tuple[int, ...]  # percent per device index
    proc_num: int  # 0..1024
    utilization_switch: int
    recent_kernel: int
    priority: int
    last_kernel_time: int  # Unix seconds, 0 = never


@dataclass(frozen=True, slots=True)
class Memory:
    context: int
    module: int
    data: int
    offset: int
    total: int  # what libvgpu.so checks against the limit


@dataclass(frozen=True, slots=True)
class Slot:
    index: int
    pid: int  # in the container's PID namespace
    hostpid: int  # 0: host-PID detection failed
    status: int  # 1 running, 2 suspended, 0 exited normally
    memory: tuple[Memory, ...]  # per device index below device_count
    sm_util: tuple[int, ...]
    seqlock: int  # odd while the owner writes `memory`


@dataclass(frozen=True, slots=True)
class Region:
    header: Header
    slots: tuple[Slot, ...]


def decode_header(head: bytes, tail: bytes, size: int) -> Header | Unreadable:
    """`head`: the first HEADER_SIZE bytes, `tail`: TAIL_SIZE bytes from TAIL_AT, `size`: the
    file's size. The checks are HAMi's (size, magic, version) and the bounds it omits."""
    if size < layout.REGION_SIZE or len(head) < layout.HEADER_SIZE or len(tail) < layout.TAIL_SIZE:
        return Unreadable(TOO_SMALL, f"{size} bytes, a region has {layout.REGION_SIZE}")
    (magic,) = _I32.unpack_from(head, layout.MAGIC_AT)
    if magic != layout.MAGIC:
        return Unreadable(NOT_INITIALIZED, f"initialized_flag {magic}, not {layout.MAGIC}")
    major, minor = struct.unpack_from("<II", head, layout.MAJOR_AT)
    if major != layout.MAJOR_VERSION:
        return Unreadable(VERSION, f"version {major}.{minor}, this monitor reads 1.x")
    (device_count,) = _U64.unpack_from(head, layout.DEVICE_NUM_AT)
    if device_count > layout.DEVICES:
        return Unreadable(DEVICE_COUNT, f"device_num {device_count}, at most {layout.DEVICES}")
    proc_num, switch, recent, priority, last_kernel = _TAIL.unpack_from(tail, 0)
    if not 0 <= proc_num <= layout.SLOTS:
        return Unreadable(PROCESS_COUNT, f"proc_num {proc_num}, at most {layout.SLOTS}")
    (names,) = _UUIDS.unpack_from(head, layout.UUIDS_AT)
    uuids = tuple(
        _uuid(names[i * layout.UUID_SIZE : (i + 1) * layout.UUID_SIZE]) for i in range(device_count)
    )
    limits = _LIMITS.unpack_from(head, layout.LIMIT_AT)[:device_count]
    sm_limits = _LIMITS.unpack_from(head, layout.SM_LIMIT_AT)[:device_count]
    return Header(
        device_count, uuids, limits, sm_limits, proc_num, switch, recent, priority, last_kernel
    )


def decode_slot(index: int, data: bytes, device_count: int) -> Slot:
    """One slot's SLOT_SIZE bytes (device_count already bounded by decode_header)."""
    pid, hostpid = struct.unpack_from("<ii", data, layout.SLOT_PID_AT)
    (status,) = _I32.unpack_from(data, layout.SLOT_STATUS_AT)
    (seqlock,) = _U64.unpack_from(data, layout.SLOT_SEQLOCK_AT)
    memory = tuple(
        Memory(*_MEMORY.unpack_from(data, layout.SLOT_USED_AT + layout.MEMORY_SIZE * d))
        for d in range(device_count)
    )
    sm_util = tuple(
        _U64.unpack_from(data, layout.SLOT_UTIL_AT + layout.UTIL_SIZE * d + layout.SM_UTIL_IN_UTIL)[
            0
        ]
        for d in range(device_count)
    )
    return Slot(index, pid, hostpid, status, memory, sm_util, seqlock)


def seqlock_of(data: bytes) -> int:
    """The seqlock field of a slot's bytes (the reader compares it before and after)."""
    return int(_U64.unpack_from(data, layout.SLOT_SEQLOCK_AT)[0])


def _uuid(raw: bytes) -> str | None:
    text = raw.split(b"\0", 1)[0]
    if len(text) == len(raw):  # not NUL-terminated: garbled
        return None
    try:
        name = text.decode("ascii")
    except UnicodeDecodeError:
        return None
    return name if _UUID.fullmatch(name) else None
