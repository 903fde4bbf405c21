"""The default run's jobs (tests/support/suite.py), started longest first into a fixed number
of places, each as soon as one is free: no lane is balanced by hand.

A job's length is what it took the last time it passed on this machine (kept in the cache,
TIMES_FILE), else the seed the project keeps (SEED_FILE: the cache of two warm runs on the
2-core development machine, 2026-12-07, copied; refresh it the same way), else the
longest known, so that a new job starts early rather than last. That is the "longest
processing time first" rule of list scheduling: the longest jobs cannot be left for the end.
A job marked `leading` (the static checks: seconds long) starts before them, so that a lint
failure is said at the start of the run, not at its end.

A job marked `first` (the `timed` tests, which measure latencies and memory under attack) is
started at once, outside the places, in a CPU group of its own whose share of the CPU dwarfs
everything else's (`PriorityGroup`: cgroup v1 `cpu.shares`, or cgroup v2 `cpu.weight`), so that
what the other jobs run beside it takes its CPU only when it leaves some. Where no such group
can be made (not root, no writable CPU controller), it runs alone after all the others, as it
must then.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

SEED_FILE = Path(__file__).with_name("suite_times.json")
TIMES_FILE = (
    Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    / "hami-dra-webhook"
    / "suite-times.json"
)


@dataclass
class Job:
    """One process of the run: a pytest run (its JUnit report at `junit`) or another command."""

    name: str
    command: list[str]
    junit: Path
    log: Path
    env: dict[str, str] | None = None
    first: bool = False  # started at once in the priority group (see the module's docstring)
    leading: bool = False  # started before the longest (the static checks: a failure said early)
    code: int = 0
    seconds: float = 0.0
    cpu: float = 0.0  # CPU seconds of the job and every process of it that was waited for
    started: float = field(default=0.0, repr=False)


def read_times(*files: Path) -> dict[str, float]:
    """The jobs' lengths in seconds, the earlier files' winning; a file that is missing or not
    a JSON object of numbers is left out."""
    times: dict[str, float] = {}
    for path in reversed(files):
        try:
            found = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(found, dict):
            times.update({str(k): float(v) for k, v in found.items() if isinstance(v, int | float)})
    return times


def write_times(jobs: Sequence[Job], path: Path = TIMES_FILE) -> None:
    """Keep each job that passed's length for the next run's order (those that failed keep
    their last good one)."""
    times = read_times(path)
    times.update({job.name: round(job.seconds, 1) for job in jobs if job.code == 0})
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(times, indent=1, sort_keys=True) + "\n")
    except OSError:
        pass  # a read-only cache only costs the next run its order


def longest_first(jobs: Sequence[Job], times: dict[str, float]) -> list[Job]:
    """The jobs in the order they start: the `leading` ones, then the longest first; an unknown
    one as the longest."""
    unknown = max(times.values(), default=0.0) + 1
    return sorted(jobs, key=lambda job: (not job.leading, -times.get(job.name, unknown)))


def _call(
    command: list[str], cwd: Path, output: BinaryIO, env: dict[str, str] | None
) -> tuple[int, float]:
    """`command`'s exit code and CPU seconds (user and system, its own and those of the
    processes it, or they, waited for: a process left to init is not counted)."""
    process = subprocess.Popen(command, cwd=cwd, stdout=output, stderr=subprocess.STDOUT, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, usage.ru_utime + usage.ru_stime


class PriorityGroup:
    """A CPU cgroup whose processes win the CPU over everything outside it (shares 262,144
    against a process's 1,024 on cgroup v1; weight 10,000 against 100 on cgroup v2). Its name
    starts with "hami-suite-": the node tests, which compare the machine's cgroups before and
    after (tests/node/host.py), leave such groups out."""

    def __init__(self, name: str, root: Path = Path("/sys/fs/cgroup")) -> None:
        self.folder: Path | None = None
        candidates = [
            (root / "cpu" / name, "cpu.shares", "262144"),
            (root / "cpu,cpuacct" / name, "cpu.shares", "262144"),
            (root / name, "cpu.weight", "10000"),
        ]
        for folder, knob, value in candidates:
            if not folder.parent.is_dir() or not (folder.parent / "cgroup.procs").exists():
                continue
            try:
                folder.mkdir()
                (folder / knob).write_text(value)
            except OSError:
                self._remove(folder)
                continue
            self.folder = folder
            return

    def wrap(self, command: list[str]) -> list[str]:
        """`command`, started inside the group (a shell that moves itself there, then execs)."""
        assert self.folder is not None
        procs = shlex.quote(str(self.folder / "cgroup.procs"))
        return ["sh", "-c", f'echo $$ > {procs} && exec "$@"', "sh", *command]

    def close(self) -> None:
        if self.folder is not None:
            self._remove(self.folder)

    @staticmethod
    def _remove(folder: Path) -> None:
        for _ in range(50):  # its last processes may still be exiting
            try:
                folder.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)


class JobPool:
    """Runs jobs `places` at a time, longest first (see the module's docstring), each one's
    output into its log; `announce` is told of each start, `ended` of each end (one call at a
    time, so that what they print is not interleaved)."""

    def __init__(
        self,
        root: Path,
        places: int,
        times: dict[str, float],
        priority: PriorityGroup | None,
        announce: Callable[[str], None],
        ended: Callable[[Job], None],
    ) -> None:
        self.root, self.places, self.times = root, places, times
        self.priority, self.announce, self.ended = priority, announce, ended
        self._free = threading.Semaphore(places)
        self._done: list[Job] = []
        self._lock = threading.Lock()

    def run(self, jobs: Sequence[Job]) -> list[Job]:
        """Every job, to its end; returned in the order they ended. A `first` job without a
        priority group runs after the others."""
        first = [job for job in jobs if job.first]
        group = self.priority
        threads = [self._start(job, group.wrap(job.command)) for job in first] if group else []
        for job in longest_first([job for job in jobs if not job.first], self.times):
            self._free.acquire()
            threads.append(self._start(job, job.command, release=True))
        for thread in threads:
            thread.join()
        for job in first if group is None else []:
            self._start(job, job.command).join()
        return list(self._done)

    def _start(self, job: Job, command: list[str], release: bool = False) -> threading.Thread:
        known = self.times.get(job.name)
        said = f" (about {known:.0f} s last time)" if known else ""
        with self._lock:
            self.announce(f"== {job.name}: {shlex.join(job.command)}{said}")

        def follow() -> None:
            job.started = time.monotonic()
            job.code = 127  # until it has run: a job that could not start has failed
            try:
                with job.log.open("wb") as output:
                    try:
                        job.code, job.cpu = _call(command, self.root, output, job.env)
                    except OSError as error:
                        output.write(f"could not start {command[0]}: {error}\n".encode())
            finally:
                job.seconds = time.monotonic() - job.started
                with self._lock:
                    self._done.append(job)
                    self.ended(job)
                if release:
                    self._free.release()

        thread = threading.Thread(target=follow, name=job.name, daemon=True)
        thread.start()
        return thread
