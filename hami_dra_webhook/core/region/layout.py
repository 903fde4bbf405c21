"""The layout of `shared_region_t` at HAMi-core 8c32de6 (the commit the HAMi DRA driver v0.1.0
pins; unchanged at 8f3a89c), x86-64, little-endian. Offsets as `offsetof` printed them and as
HAMi v2.10's Go mirror pins them (`../shared/NODE-MONITOR.md`, section 2)."""

from __future__ import annotations

from typing import Final

MAGIC: Final = 19920718  # initialized_flag, written last by the first process
MAJOR_VERSION: Final = 1
MINOR_VERSION: Final = 2
DEVICES: Final = 16  # CUDA_DEVICE_MAX_COUNT
SLOTS: Final = 1024  # SHARED_REGION_MAX_PROCESS_NUM
REGION_SIZE: Final = 2_008_952  # sizeof(shared_region_t); the file is one byte longer

# The header: everything before the slots.
MAGIC_AT: Final = 0
MAJOR_AT: Final = 4
MINOR_AT: Final = 8
DEVICE_NUM_AT: Final = 56  # uint64
UUIDS_AT: Final = 64  # char[16][96]
UUID_SIZE: Final = 96
LIMIT_AT: Final = 1600  # uint64[16], bytes
SM_LIMIT_AT: Final = 1728  # uint64[16], percent
SLOTS_AT: Final = 1856
HEADER_SIZE: Final = SLOTS_AT

# The tail: after the slots.
PROC_NUM_AT: Final = 2_008_896  # int32, slots in use (exited ones not yet cleared included)
SWITCH_AT: Final = 2_008_900  # int32 utilization_switch: the monitor writes 0/1
RECENT_KERNEL_AT: Final = 2_008_904  # int32: the monitor decrements it, writes -1/0
PRIORITY_AT: Final = 2_008_908  # int32: CUDA_TASK_PRIORITY of the first process
LAST_KERNEL_AT: Final = 2_008_912  # uint64, Unix seconds
TAIL_AT: Final = PROC_NUM_AT
TAIL_SIZE: Final = LAST_KERNEL_AT + 8 - TAIL_AT

# One process slot (shrreg_proc_slot_t), slot k at SLOTS_AT + SLOT_SIZE * k.
SLOT_SIZE: Final = 1960
SLOT_PID_AT: Final = 0  # int32, in the container's PID namespace; 0 after a normal exit
SLOT_HOSTPID_AT: Final = 4  # int32, 0 when host-PID detection failed
SLOT_USED_AT: Final = 8  # device_memory_t[16]: five uint64 (context, module, data, offset, total)
MEMORY_SIZE: Final = 64
SLOT_UTIL_AT: Final = 1160  # device_util_t[16]: dec, enc, sm (uint64 each)
UTIL_SIZE: Final = 48
SM_UTIL_IN_UTIL: Final = 16
SLOT_STATUS_AT: Final = 1928  # int32: 1 running, 2 suspended, 0 exited normally
SLOT_SEQLOCK_AT: Final = 1936  # uint64: odd while the owner updates `used`


def slot_at(index: int) -> int:
    return SLOTS_AT + SLOT_SIZE * index
