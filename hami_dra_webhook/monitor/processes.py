"""Whether a slot's process is still there, asked of the host's /proc (the monitor runs in the
host's PID namespace): the slot's host PID must run, and that process's PID in its innermost
namespace (the last `NSpid` of its status) must be the slot's `pid`: a PID the kernel gave to
another process since is not the slot's. A slot without a host PID (detection failed in
libvgpu.so) cannot be checked and counts while its status says so, as in HAMi."""

from __future__ import annotations

from pathlib import Path

from hami_dra_webhook.core.region.usage import Life

_MAX_PID = 1 << 22  # the kernel's pid_max ceiling


class HostProcesses:
    def __init__(self, proc: Path = Path("/proc")) -> None:
        self.proc = proc

    def __call__(self, hostpid: int, pid: int) -> Life:
        if not 0 < hostpid <= _MAX_PID:
            return Life.UNKNOWN
        try:
            with (self.proc / str(hostpid) / "status").open("rb") as status:
                text = status.read(8192)
        except OSError:
            return Life.GONE
        for line in text.splitlines():
            if line.startswith(b"NSpid:"):
                numbers = line.split()[1:]
                return Life.ALIVE if numbers and numbers[-1] == str(pid).encode() else Life.GONE
        return Life.GONE
