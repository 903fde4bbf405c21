"""Giving freed memory back to the system (glibc only; elsewhere nothing changes).

glibc raises its mmap threshold each time a large block is freed, up to 32 MiB, so after one
burst of large bodies, later blocks of that size come from the heap, and a heap rarely shrinks:
a process that once held 300 MiB of request bodies keeps it. A fixed threshold keeps every
block over 128 KiB (request bodies, their parsed strings) in a mapping of its own, unmapped as
soon as it is freed; `trim` hands back what smaller blocks left free at the top of the heaps.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 128 * 1024
TRIM_THRESHOLD = 1024 * 1024

log = logging.getLogger("hami_dra_webhook.server")


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    if not hasattr(libc, "mallopt") or not hasattr(libc, "malloc_trim"):
        return None  # not glibc (musl, macOS)
    return libc


_LIBC = _libc()


def keep_large_blocks_apart() -> bool:
    """Fix the mmap and trim thresholds; True where it took effect (glibc)."""
    if _LIBC is None:
        return False
    done = bool(_LIBC.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    done = bool(_LIBC.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)) and done
    if not done:
        log.warning("could not set malloc thresholds; large bursts may keep their memory")
    return done


def trim() -> None:
    """Return free memory at the top of the heaps to the system."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
