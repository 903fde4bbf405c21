"""`./scripts/test`'s pytest runs (`python -m tests.support.suite [--long]`).

The default run is a set of jobs (JOBS_AT_ONCE at a time, longest first: tests/support/job_pool.py),
each a process of its own, chosen by where a test lives and by marker (the tier it runs in):

- the static checks (scripts/checks);
- the real node's tests (`node`: they mostly wait on the kubelet), on node 1.37
  (DEFAULT_NODE_VERSIONS; 1.36 in `--long`): each module that needs the legacy-pool node
  (`LEGACY_NODE_NEEDED`, the staged migration's) in a job of its own on a cluster of its own,
  the other modules together in one; the host lease (tests/node/host_lease.py) shares the
  machine between their clusters;
- the in-process tier: every test that uses no control plane (marked neither `plane`, `node`
  nor `timed`);
- the shared-plane tier: the tests outside tests/e2e on the shared 1.36 control plane (`plane`);
- the end-to-end tests (`tests/e2e`: they mostly wait on their control planes), one job a
  Kubernetes flavor (HAMI_E2E_FLAVORS, when the caller sets it, picks them);
- the tests marked `timed` (they measure an established connection's latency, the process's
  memory or a time bound while they attack it): at once, in a CPU group that wins the CPU over
  every other job (beside the node with the same share, they failed their 50 ms and 64 MiB
  bounds); where no such group can be made, alone after the others.

tests/test_suite_markers.py keeps the markers true. `--long` runs the longer sizes instead: the
soak and the fuzzing with more requests and examples, the node modules on the node versions the
default run leaves out (LONG_NODE_VERSIONS), and every test marked `long`. A HAMI_NODE_VERSIONS
set by the caller is kept in both.

Each job's output is shown whole when it ends, then each job's slowest tests (SLOWEST, from its
JUnit report), the whole run's wall time and the machine's CPU time (busy and idle core seconds,
from /proc/stat), each job's end, and the last line is the total: "N passed, N failed, N skipped"
(errors count as failed; a pytest job that collected nothing is a failure too).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

from tests.controlplane.versions import selected_flavors
from tests.support.job_pool import (
    SEED_FILE,
    TIMES_FILE,
    Job,
    JobPool,
    PriorityGroup,
    read_times,
    write_times,
)

ROOT = Path(__file__).resolve().parents[2]
JOBS_AT_ONCE = 5  # besides the timed tests: the machine (2 cores) is busy at about this many
ALWAYS_OUT = "not node and not timed and not long"
TIMED = ["-m", "timed and not long", "tests"]
IN_PROCESS = ["-m", f"{ALWAYS_OUT} and not plane", "tests"]
SHARED_PLANE = ["-m", f"{ALWAYS_OUT} and plane", "--ignore=tests/e2e", "tests"]
E2E = ["-m", ALWAYS_OUT, "tests/e2e"]
NODE = ["-m", "node and not long"]
LONG_SIZES = {"HAMI_SOAK_REQUESTS": "100000", "HAMI_FUZZ_EXAMPLES": "20000"}
# The node modules on one kubelet in the default run, the other in `--long` (CI's second step,
# so CI runs both). The run is bound by its CPU: the 1.36 node cluster's control plane alone
# took 44 s of it (process accounting, 2026-12-07), its tests 200-250 s of the node run, and
# the default run took 14 min 10 s to 16 min 16 s for the same work on this 2-core machine.
DEFAULT_NODE_VERSIONS = "1.37"
LONG_NODE_VERSIONS = "1.36"
NODE_IN_LONG = ["--timeout=3600", "-m", "node and not long", "tests"]


def legacy_node_modules() -> list[str]:
    """The node modules that need the legacy-pool node (`LEGACY_NODE_NEEDED = True`)."""
    return [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "tests" / "node").glob("test_*.py"))
        if re.search(r"^LEGACY_NODE_NEEDED = True\b", path.read_text(), re.MULTILINE)
    ]


@dataclass
class Run:
    name: str
    junit: Path
    code: int = 0
    seconds: float = 0.0
    cpu: float | None = None  # the job's CPU seconds (Job.cpu), where the pool measured them

    def counts(self) -> tuple[int, int, int]:
        """passed, failed (errors included), skipped, from the run's JUnit report."""
        if not self.junit.is_file():
            return 0, 1, 0
        suite = ElementTree.parse(self.junit).getroot()
        suite = suite if suite.tag == "testsuite" else suite[0]
        tests, skipped = int(suite.get("tests", 0)), int(suite.get("skipped", 0))
        failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        return tests - failed - skipped, failed, skipped

    def slowest(self, count: int) -> list[tuple[float, str]]:
        """The run's `count` slowest tests (seconds, setup and teardown included, and id),
        from its JUnit report: where the next minute of the run is to be found."""
        if not self.junit.is_file():
            return []
        cases = [
            (float(case.get("time") or 0), f"{case.get('classname')}::{case.get('name')}")
            for case in ElementTree.parse(self.junit).getroot().iter("testcase")
        ]
        return sorted(cases, reverse=True)[:count]


def _command(junit: Path, *arguments: str) -> list[str]:
    return [sys.executable, "-m", "pytest", f"--junitxml={junit}", *arguments]


def _foreground(run: Run, arguments: list[str], env: dict[str, str] | None = None) -> None:
    print(f"== pytest {shlex.join(arguments)}", flush=True)
    started = time.monotonic()
    run.code = subprocess.call(_command(run.junit, *arguments), cwd=ROOT, env=env)
    run.seconds = time.monotonic() - started


def _long_runs(folder: Path) -> list[Run]:
    """`--long`: the longer sizes, the node modules on the other node versions, and every test
    marked long, one after another."""
    sized = Run("soak and fuzz, long sizes", folder / "sized.xml")
    _foreground(
        sized,
        ["--timeout=3600", "tests/server/test_soak.py", "tests/server/test_fuzz.py"],
        env={**os.environ, **LONG_SIZES},
    )
    runs = [sized]
    if not os.environ.get("HAMI_NODE_VERSIONS"):
        node = Run(f"node on {LONG_NODE_VERSIONS}", folder / "node-long.xml")
        env = {**os.environ, "HAMI_NODE_VERSIONS": LONG_NODE_VERSIONS}
        _foreground(node, NODE_IN_LONG, env=env)
        runs.append(node)
    marked = Run("tests marked long", folder / "long.xml")
    _foreground(marked, ["--timeout=3600", "-m", "long", "tests"])
    return [*runs, marked]


def default_jobs(folder: Path) -> list[Job]:
    """The default run's jobs (see the module's docstring)."""

    def pytest_job(name: str, key: str, arguments: list[str], **env: str) -> Job:
        junit = folder / f"{key}.xml"
        return Job(
            name,
            _command(junit, *arguments),
            junit,
            folder / f"{key}.log",
            env={**os.environ, **env} if env else None,
        )

    node_env = {"HAMI_NODE_VERSIONS": os.environ.get("HAMI_NODE_VERSIONS", DEFAULT_NODE_VERSIONS)}
    legacy = legacy_node_modules()
    jobs = [
        Job("static checks", [str(ROOT / "scripts" / "checks")], folder / "none.xml",
            folder / "checks.log", leading=True),
        *(pytest_job(f"node: {Path(m).name}", Path(m).stem, [*NODE, m], **node_env)
          for m in legacy),
        pytest_job("node: the other modules", "node",
                   [*NODE, *(f"--ignore={m}" for m in legacy), "tests"], **node_env),
        pytest_job("in process", "in-process", IN_PROCESS),
        pytest_job("shared plane", "shared-plane", SHARED_PLANE),
        *(pytest_job(f"end-to-end {f.id}", f"e2e-{f.id}", E2E, HAMI_E2E_FLAVORS=f.id)
          for f in selected_flavors()),
    ]  # fmt: skip
    timed = pytest_job("timed", "timed", TIMED)
    timed.first = True
    return [*jobs, timed]


def _ended(job: Job) -> None:
    print(
        f"== {job.name}: ended, exit {job.code}, in {job.seconds:.0f} s"
        f" ({job.cpu:.0f} s CPU); its output:"
    )
    sys.stdout.write(job.log.read_text(errors="replace") if job.log.is_file() else "")
    sys.stdout.flush()


def _default_runs(folder: Path) -> tuple[list[Run], int]:
    """The default run's jobs, longest first, JOBS_AT_ONCE at a time; its pytest runs and the
    static checks' exit code."""
    priority = PriorityGroup(f"hami-suite-{os.getpid()}")
    if priority.folder is None:
        print("== no CPU group for the timed tests here: they run after the others", flush=True)
    times = read_times(TIMES_FILE, SEED_FILE)
    pool = JobPool(ROOT, JOBS_AT_ONCE, times, priority if priority.folder else None,
                   lambda line: print(line, flush=True), _ended)  # fmt: skip
    try:
        ended = pool.run(default_jobs(folder))
    finally:
        priority.close()
    write_times(ended)
    checks = next(job for job in ended if job.name == "static checks")
    runs = [
        Run(job.name, job.junit, job.code, job.seconds, job.cpu)
        for job in ended
        if job is not checks
    ]
    return runs, checks.code


SLOWEST = 5  # tests named per run, slowest first


@dataclass(frozen=True)
class CpuClock:
    """The machine's CPU time so far (every core, every process: the control planes, kubelets
    and containerds the tests start are not the suite's children), from /proc/stat."""

    busy: float  # seconds some core ran anything: user, nice, system, irq, softirq, steal
    idle: float  # seconds the cores idled or waited on I/O

    @classmethod
    def read(cls, stat: Path = Path("/proc/stat")) -> CpuClock | None:
        try:
            first = stat.read_text().splitlines()[0].split()
        except (OSError, IndexError):
            return None
        if not first or first[0] != "cpu" or len(first) < 9:
            return None
        ticks = [int(value) for value in first[1:9]]
        per_second = os.sysconf("SC_CLK_TCK")
        user, nice, system, idle, iowait, irq, softirq, steal = ticks
        busy = user + nice + system + irq + softirq + steal
        return cls(busy / per_second, (idle + iowait) / per_second)


def _say_cpu(start: CpuClock | None, wall: float) -> None:
    """The whole run's wall time and the machine's CPU time spent in it (busy and idle core
    seconds): the run is bound by its CPU where idle is near nothing."""
    end = CpuClock.read()
    if start is None or end is None:
        return
    busy, idle = end.busy - start.busy, end.idle - start.idle
    cores = os.cpu_count() or 1
    print(
        f"== the run: {wall:.0f} s wall, {busy:.0f} s CPU busy and {idle:.0f} s idle"
        f" on {cores} cores ({100 * busy / max(busy + idle, 1e-9):.0f}% busy)"
    )


def _say_slowest(runs: list[Run]) -> None:
    """Each run's slowest tests, written down at every run (as Kueue's runner does), so that a
    slow new test is seen the day it lands."""
    for run in runs:
        print(f"== {run.name}: its slowest tests")
        for seconds, test in run.slowest(SLOWEST):
            print(f"  {seconds:7.1f} s  {test}")


def main(argv: list[str]) -> int:
    folder = Path(tempfile.mkdtemp(prefix="hami-suite-"))
    clock, started = CpuClock.read(), time.monotonic()
    checks_code = 0  # the default run's static checks (the others ran them before)
    if argv == ["--long"]:
        runs = _long_runs(folder)
    else:
        runs, checks_code = _default_runs(folder)
    _say_slowest(runs)
    _say_cpu(clock, time.monotonic() - started)
    totals = [0, 0, 0]
    if checks_code != 0:
        print(f"== static checks: exit {checks_code}")
        totals[1] += 1
    for run in runs:
        passed, failed, skipped = run.counts()
        if run.code not in (0, 1) and failed == 0:
            failed = 1  # it collected nothing (5), was interrupted, or pytest itself failed
        cpu = "" if run.cpu is None else f" ({run.cpu:.0f} s CPU)"
        print(
            f"== {run.name}: exit {run.code}, {passed} passed, {failed} failed,"
            f" {skipped} skipped in {run.seconds:.0f} s{cpu}"
        )
        totals = [totals[0] + passed, totals[1] + failed, totals[2] + skipped]
    print(f"{totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
    return 0 if totals[1] == 0 and all(run.code == 0 for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
