"""`./scripts/test`'s pytest runs (`python -m tests.support.suite [--long]`).

The default run is the static checks (scripts/checks) and six pytest runs, chosen by marker,
four of them at once from the start. The tests marked `node` (the real node: they mostly wait
on the kubelet and the pods) run in two: the staged-migration module (its own 1.37 cluster
with a legacy node) and every other node module (on 1.37 here, DEFAULT_NODE_VERSIONS; on 1.36
in `--long`); the host lease (tests/node/host_lease.py) shares the machine between their
clusters. Beside them run the end-to-end tests (`tests/e2e`: they mostly wait on their control
planes) of the later Kubernetes flavors (LATER_FLAVORS), those of AFTER_NODE_FLAVORS once the
other node modules' run has ended (it ends first), the static checks, and in the foreground
the other tests marked neither `node` nor `timed`, with the end-to-end tests of FIRST_FLAVORS.
Then the tests marked `timed`, which measure an established connection's latency, the
process's memory or a time bound while they attack it, run alone on a quiet machine (beside
the node, they failed their 50 ms and 64 MiB bounds). A HAMI_E2E_FLAVORS set by the caller is
kept: the end-to-end tests then run in the foreground run.
tests/test_suite_markers.py keeps the markers true. `--long` runs the longer sizes instead: the
soak and the fuzzing with more requests and examples, the node modules on the node versions the
default run leaves out (LONG_NODE_VERSIONS), and every test marked `long`. A HAMI_NODE_VERSIONS
set by the caller is kept in both.

Each run's output is shown whole (the ones beside are shown when they end), then each run's
slowest tests (SLOWEST, from its JUnit report), the whole run's wall time and the machine's CPU
time (busy and idle core seconds, from /proc/stat), and the last line is the runs' total: "N passed, N failed, N skipped" (errors count as failed; a run that
collected nothing is a failure too).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

ROOT = Path(__file__).resolve().parents[2]
# The node's tests in two runs at once (each its own confined clusters; the host lease,
# tests/node/host_lease.py, shares the machine between them): the staged-migration module
# alone in one, everything else in the other.
STAGED_NODE_MODULES = ("tests/node/test_staged_migration.py",)
NODE_STAGED = ["-m", "node and not long", *STAGED_NODE_MODULES]
NODE_OTHERS = [
    "-m",
    "node and not long",
    *(f"--ignore={module}" for module in STAGED_NODE_MODULES),
    "tests",
]
TIMED = ["-m", "timed and not long", "tests"]
QUIET = ["-m", "not node and not timed and not long", "tests"]
E2E = ["-m", "not node and not timed and not long", "tests/e2e"]
# The end-to-end flavors in three parts (measured 2026-12-07 at 88a4d2b: quiet 742 s with the
# first two flavors and every test outside tests/e2e, the later four 677 s, the node run 418 s;
# 1.34-on's end-to-end tests took about 195 s at 1f86f76): 1.34-off with the quiet tests,
# 1.34-on once the node run (not the staged one) has ended, the later four beside them all.
FIRST_FLAVORS = "1.34-off"
AFTER_NODE_FLAVORS = "1.34-on"
LATER_FLAVORS = "1.35-on,1.36,1.37,1.38"
LONG_SIZES = {"HAMI_SOAK_REQUESTS": "100000", "HAMI_FUZZ_EXAMPLES": "20000"}
# The node modules on one kubelet in the default run, the other in `--long` (CI's second step,
# so CI runs both). The run is bound by its CPU: the 1.36 node cluster's control plane alone
# took 44 s of it (process accounting, 2026-12-07), its tests 200-250 s of the node run, and
# the default run took 14 min 10 s to 16 min 16 s for the same work on this 2-core machine.
DEFAULT_NODE_VERSIONS = "1.37"
LONG_NODE_VERSIONS = "1.36"
NODE_IN_LONG = ["--timeout=3600", "-m", "node and not long", "tests"]


@dataclass
class Run:
    name: str
    junit: Path
    code: int = 0
    seconds: float = 0.0

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


def _pytest_beside(
    run: Run, arguments: list[str], log: Path, env: dict[str, str] | None = None
) -> tuple[threading.Thread, Path]:
    """A pytest run beside the foreground one (see `_beside`)."""
    command = _command(run.junit, *arguments)
    return _beside(run, command, log, env, shown=f"pytest {shlex.join(arguments)}")


def _beside(
    run: Run,
    command: list[str],
    log: Path,
    env: dict[str, str] | None = None,
    shown: str | None = None,
) -> tuple[threading.Thread, Path]:
    """Start `command` beside the foreground run, its output into `log`; the thread returned
    ends with it, having set its exit code and its own duration."""
    print(f"== {shown or shlex.join(command)} ({run.name}: beside the next run)", flush=True)
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT, env=env
        )
    started = time.monotonic()

    def wait() -> None:
        run.code = process.wait()
        run.seconds = time.monotonic() - started

    waiter = threading.Thread(target=wait, name=run.name, daemon=True)
    waiter.start()
    return waiter, log


def _pytest_after(
    before: threading.Thread,
    run: Run,
    arguments: list[str],
    log: Path,
    env: dict[str, str] | None = None,
) -> tuple[threading.Thread, Path]:
    """A pytest run beside the foreground one that starts once `before` has ended (its
    output into `log`); the thread returned ends with it, as `_beside`'s does."""
    print(f"== pytest {shlex.join(arguments)} ({run.name}: once {before.name} ends)", flush=True)

    def follow() -> None:
        before.join()
        started = time.monotonic()
        with log.open("wb") as output:
            command = _command(run.junit, *arguments)
            run.code = subprocess.call(
                command, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT, env=env
            )
        run.seconds = time.monotonic() - started

    waiter = threading.Thread(target=follow, name=run.name, daemon=True)
    waiter.start()
    return waiter, log


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


def _default_runs(folder: Path) -> tuple[list[Run], int]:
    """The default run (see the module's docstring): its pytest runs and the static checks'
    exit code."""
    split = not os.environ.get("HAMI_E2E_FLAVORS")
    staged = Run("node, staged migration", folder / "node-staged.xml")
    node = Run("node, the others", folder / "node.xml")
    node_env = {"HAMI_NODE_VERSIONS": DEFAULT_NODE_VERSIONS, **os.environ}  # the caller's wins
    node_waiter = _pytest_beside(node, NODE_OTHERS, folder / "node.log", node_env)
    beside = [
        (staged, _pytest_beside(staged, NODE_STAGED, folder / "staged.log")),
        (node, node_waiter),
    ]
    if split:
        later = Run("end-to-end, later flavors", folder / "later.xml")
        env = {**os.environ, "HAMI_E2E_FLAVORS": LATER_FLAVORS}
        beside.append((later, _pytest_beside(later, E2E, folder / "later.log", env)))
        middle = Run("end-to-end, after the node", folder / "middle.xml")
        env = {**os.environ, "HAMI_E2E_FLAVORS": AFTER_NODE_FLAVORS}
        beside.append(
            (middle, _pytest_after(node_waiter[0], middle, E2E, folder / "middle.log", env))
        )
    checks = Run("static checks", folder / "none.xml")
    checks_command = [str(ROOT / "scripts" / "checks")]
    beside.append((checks, _beside(checks, checks_command, folder / "checks.log")))
    quiet = Run("quiet", folder / "quiet.xml")
    _foreground(
        quiet, QUIET, env={**os.environ, "HAMI_E2E_FLAVORS": FIRST_FLAVORS} if split else None
    )
    for run, (waiter, log) in beside:
        waiter.join()
        print(f"== {run.name}: its output", flush=True)
        sys.stdout.write(log.read_text(errors="replace"))
    timed = Run("timed", folder / "timed.xml")
    _foreground(timed, TIMED)
    return [run for run, _ in beside if run is not checks] + [quiet, timed], checks.code


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
        print(
            f"== {run.name}: exit {run.code}, {passed} passed, {failed} failed,"
            f" {skipped} skipped in {run.seconds:.0f} s"
        )
        totals = [totals[0] + passed, totals[1] + failed, totals[2] + skipped]
    print(f"{totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
    return 0 if totals[1] == 0 and all(run.code == 0 for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
