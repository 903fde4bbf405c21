"""Giving freed memory back to the system (glibc only; elsewhere nothing changes).

glibc raises its mmap threshold each time a large block is freed, up to 32 MiB, so after one
burst of large bodies, later blocks of that size come from the heap, and a heap rarely shrinks:
a process that once held 300 MiB of request bodies keeps it. `trim` (malloc_trim) hands back
every free page of the heaps, not only those at their top; the server calls it once the large
bodies in flight are all answered and after every burst of closed connections, after a
collection of the garbage cycles that closed connections leave.

Fixing the mmap threshold instead (mallopt) was measured and not taken: every read buffer of
TLS (256 KiB) then became an mmap and munmap, about 50 us more CPU per request.

`one_heap` keeps every thread on the main heap. glibc gives each new thread a heap of its own
(up to 8 per core), and a trim hands back only the free pages inside a thread's heap, never
its free top; the large-review thread (which decodes and translates pods of thousands of
containers) kept 7-8 MiB that way after three 10,000-container conversions. With one heap:
measured on the server with uvloop, three 10,000-container conversions and two 40,000-container
refusals left +23.0/+24.0 MiB before (two runs), +14.1/+16.1 MiB with one heap. The threads
then share one heap's lock; they already take turns under the GIL (its cost was not measured
apart: the machine was never quiet enough to see it).
The rest of what is kept is CPython's own small-object arenas (1 MiB each, held by any one
object that outlives the request). PYTHONMALLOC=malloc would hand those back too (+0.5 MiB
measured), but it must be set before the interpreter starts and replaces the allocator of every
small object: cachegrind counted 9.0 % more instructions per new pod and 6.6 % per repeated one
in the translation path, so it is not taken.
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
