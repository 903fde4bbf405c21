"""Giving freed memory back to the system (glibc only; elsewhere nothing changes).

glibc keeps freed heap memory after a burst of large request bodies; `trim` (malloc_trim) hands
back every free page of the heaps, and the server calls it once the large bodies in flight are
answered and after every burst of closed connections. `one_heap` keeps every thread on the main
heap, so that a trim reaches what the large-review thread freed. What was measured, and what
was not taken (a fixed mmap threshold, PYTHONMALLOC=malloc):
docs/design/2026-12-02-memory-return.md.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import threading


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    if not hasattr(libc, "malloc_trim"):
        return None  # not glibc (musl, macOS)
    return libc


_LIBC = _libc()

# mallopt's parameter for the number of heaps (malloc.h: M_ARENA_MAX).
_M_ARENA_MAX = -8


def one_heap() -> bool:
    """Every thread allocates from the main heap from now on (threads that already have a heap
    of their own keep it): called before the server starts its threads. False where it is not
    glibc."""
    return _LIBC is not None and _LIBC.mallopt(_M_ARENA_MAX, 1) == 1


_TRIMMING = threading.Lock()
_pending: asyncio.TimerHandle | None = None
SETTLE = 1.0


def trim_soon() -> None:
    """Trim SETTLE seconds from now, unless a trim is already due: what a burst frees goes a
    little after it ends (aborted connections, their buffers), and a steady stream of calls
    makes at most one trim a second."""
    global _pending  # noqa: PLW0603 (one pending trim per process)
    if _LIBC is None or _pending is not None:
        return
    _pending = asyncio.get_running_loop().call_later(SETTLE, _trim_due)


def _trim_due() -> None:
    global _pending  # noqa: PLW0603
    _pending = None
    # Closed connections leave reference cycles (protocol, transport, SSL object, their
    # buffers) that only the cyclic collector frees, and it may not run for a long while after
    # a burst: 600 slow readers kept +25-31 MiB after they were all closed until it did.
    # Collected here first (measured 2-6 ms on the loop, at most once a second).
    gc.collect()
    trim()


def trim() -> None:
    """Return the heaps' free pages to the system, in a thread of its own (ctypes lets go of
    the GIL; a trim takes milliseconds), so that the event loop never waits for it; one at a
    time."""
    if _LIBC is None or not _TRIMMING.acquire(blocking=False):
        return
    threading.Thread(target=_trim_and_release, args=(_LIBC,), daemon=True).start()


def _trim_and_release(libc: ctypes.CDLL) -> None:
    try:
        libc.malloc_trim(0)
    finally:
        _TRIMMING.release()
