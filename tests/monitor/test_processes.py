"""Liveness of a slot's process, asked of this machine's real /proc: the process of the test
run, one in a PID namespace of its own (unshare, as a container's PID 1), one that ended."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from hami_dra_webhook.core.region.usage import Life
from hami_dra_webhook.monitor.processes import HostProcesses


def test_this_process_is_alive_and_another_pid_is_not_it() -> None:
    processes = HostProcesses()
    assert processes(os.getpid(), os.getpid()) is Life.ALIVE
    assert processes(os.getpid(), os.getpid() + 1) is Life.GONE  # a reused host PID
    assert processes(0, 1) is Life.UNKNOWN  # libvgpu.so found no host PID
    assert processes(-5, 1) is Life.UNKNOWN and processes(1 << 30, 1) is Life.UNKNOWN


def test_an_ended_process_is_gone() -> None:
    child = subprocess.Popen(["true"])
    child.wait()
    assert HostProcesses()(child.pid, child.pid) is Life.GONE


def test_a_container_pid_one_is_alive_under_its_host_pid() -> None:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        reason = "a PID namespace of its own needs root and unshare"
        if os.environ.get("HAMI_E2E_REQUIRED") == "1":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    child = subprocess.Popen(["unshare", "--pid", "--fork", "sleep", "30"])
    try:
        sleeper = _child_of(child.pid)
        assert HostProcesses()(sleeper, 1) is Life.ALIVE  # PID 1 in its own namespace
        assert HostProcesses()(sleeper, sleeper) is Life.GONE
    finally:
        child.kill()
        child.wait()


def _child_of(pid: int) -> int:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.02)
    raise AssertionError("unshare started no child")
