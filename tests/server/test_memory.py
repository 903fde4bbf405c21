"""The server's use of glibc's allocator (server/memory.py), checked on glibc itself: how many
heaps the process has, as glibc's own `malloc_info` reports them."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from hami_dra_webhook.server import memory

# Counts the heaps glibc reports, after a thread has allocated (the thread's first malloc is
# where glibc gives it a heap of its own, unless it may not).
_HEAPS_AFTER_A_THREAD = textwrap.dedent(
    """
    import ctypes, os, sys, tempfile, threading
    from hami_dra_webhook.server import memory
    if sys.argv[1] == "one":
        assert memory.one_heap()
    libc = ctypes.CDLL("libc.so.6")
    libc.fdopen.restype = libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    def allocate():
        blocks = [libc.malloc(4096) for _ in range(1000)]
        for block in blocks:
            libc.free(block)
    thread = threading.Thread(target=allocate)
    thread.start()
    thread.join()
    with tempfile.TemporaryFile() as report:
        stream = libc.fdopen(os.dup(report.fileno()), b"w")
        libc.malloc_info(0, ctypes.c_void_p(stream))
        libc.fclose(ctypes.c_void_p(stream))
        report.seek(0)
        print(report.read().decode().count("<heap nr="))
    """
)


def _heaps(mode: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", _HEAPS_AFTER_A_THREAD, mode],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return int(done.stdout)


@pytest.mark.skipif(memory._LIBC is None, reason="not glibc: the server leaves malloc alone")
def test_one_heap_keeps_a_new_thread_on_the_main_heap() -> None:
    """Without it a thread that allocates gets a heap of its own (the large-review thread kept
    7-8 MiB in its heap's free top, which a trim does not hand back)."""
    assert _heaps("default") == 2
    assert _heaps("one") == 1
