"""The default run's job pool (tests/support/job_pool.py): longest first, a fixed number at
once, the lengths kept for the next run, and the timed tests first in a CPU group of their own
or else last. The jobs here are real processes (`sh -c`), a few tenths of a second each."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from tests.support.job_pool import (
    Job,
    JobPool,
    PriorityGroup,
    longest_first,
    read_times,
    write_times,
)


def _job(tmp_path: Path, name: str, script: str, first: bool = False) -> Job:
    # Each job writes when it started and ended, on the machine's monotonic clock.
    command = [
        sys.executable,
        "-c",
        "import sys, time; print('start', time.monotonic()); "
        f"{script}; print('end', time.monotonic())",
    ]
    return Job(name, command, tmp_path / f"{name}.xml", tmp_path / f"{name}.log", first=first)


def _span(job: Job) -> tuple[float, float]:
    found = dict(line.split(" ", 1) for line in job.log.read_text().splitlines() if " " in line)
    return float(found["start"]), float(found["end"])


def _pool(tmp_path: Path, places: int, times: dict[str, float], priority=None) -> JobPool:  # type: ignore[no-untyped-def]
    return JobPool(tmp_path, places, times, priority, lambda line: None, lambda job: None)


def test_the_longest_known_job_starts_first_and_an_unknown_one_before_it(tmp_path: Path) -> None:
    jobs = [_job(tmp_path, name, "pass") for name in ("short", "long", "new", "middle")]
    order = longest_first(jobs, {"short": 10, "long": 300, "middle": 60})
    assert [job.name for job in order] == ["new", "long", "middle", "short"]


def test_a_leading_job_starts_before_the_longest(tmp_path: Path) -> None:
    checks = _job(tmp_path, "checks", "pass")
    checks.leading = True
    jobs = [_job(tmp_path, "long", "pass"), checks, _job(tmp_path, "new", "pass")]
    order = longest_first(jobs, {"long": 300, "checks": 5})
    assert [job.name for job in order] == ["checks", "new", "long"]


def test_no_more_jobs_run_at_once_than_there_are_places(tmp_path: Path) -> None:
    jobs = [_job(tmp_path, f"j{i}", "time.sleep(0.3)") for i in range(5)]
    ended = _pool(tmp_path, 2, {}).run(jobs)
    assert sorted(job.name for job in ended) == [f"j{i}" for i in range(5)]
    spans = [_span(job) for job in jobs]
    for moment, _ in spans:
        running = sum(start <= moment + 0.01 and moment < end for start, end in spans)
        assert running <= 2, spans
    assert all(job.code == 0 and job.seconds >= 0.3 for job in jobs)


def test_a_failing_job_says_its_exit_code_and_the_others_still_run(tmp_path: Path) -> None:
    jobs = [_job(tmp_path, "fails", "sys.exit(3)"), _job(tmp_path, "passes", "pass")]
    _pool(tmp_path, 1, {}).run(jobs)
    assert [job.code for job in jobs] == [3, 0]


def test_a_job_counts_the_cpu_of_the_processes_it_waited_for(tmp_path: Path) -> None:
    burn = "import time; end = time.process_time() + 0.4\nwhile time.process_time() < end: pass"
    child = f"import subprocess; subprocess.run([sys.executable, '-c', {burn!r}], check=True)"
    busy, idle = _job(tmp_path, "busy", child), _job(tmp_path, "idle", "time.sleep(0.4)")
    _pool(tmp_path, 2, {}).run([busy, idle])
    assert busy.cpu >= 0.4, busy.cpu  # the grandchild's 0.4 s of CPU, read at the job's end
    assert idle.cpu < 0.3, idle.cpu  # sleeping costs only the interpreter's start


def test_a_job_that_cannot_start_has_failed_and_says_why(tmp_path: Path) -> None:
    missing = Job(
        "gone", [str(tmp_path / "no-such-program")], tmp_path / "g.xml", tmp_path / "g.log"
    )
    _pool(tmp_path, 1, {}).run([missing])
    assert missing.code == 127
    assert "could not start" in missing.log.read_text()


def test_a_first_job_without_a_cpu_group_runs_after_all_the_others(tmp_path: Path) -> None:
    timed = _job(tmp_path, "timed", "time.sleep(0.1)", first=True)
    others = [_job(tmp_path, f"o{i}", "time.sleep(0.2)") for i in range(3)]
    ended = _pool(tmp_path, 3, {}).run([timed, *others])
    assert ended[-1] is timed
    assert _span(timed)[0] >= max(_span(job)[1] for job in others)


@pytest.mark.skipif(os.geteuid() != 0, reason="a CPU cgroup needs root")
def test_a_first_job_starts_at_once_inside_the_cpu_group(tmp_path: Path) -> None:
    group = PriorityGroup(f"hami-suite-test-{os.getpid()}")  # tests/node/host.py leaves it
    assert group.folder is not None, "root here, and no writable CPU controller"
    try:
        script = "print('cgroup', open('/proc/self/cgroup').read().replace(chr(10), ' '))"
        timed = _job(tmp_path, "timed", script, first=True)
        other = _job(tmp_path, "other", "time.sleep(0.5)")
        _pool(tmp_path, 1, {}, group).run([other, timed])
        assert group.folder.name in timed.log.read_text()
        assert group.folder.name not in other.log.read_text()
        assert _span(timed)[0] < _span(other)[1]  # beside it, not after it
    finally:
        group.close()
    assert not group.folder.exists()


def test_the_lengths_of_the_jobs_that_passed_are_kept_for_the_next_run(tmp_path: Path) -> None:
    kept = tmp_path / "cache" / "times.json"
    kept.parent.mkdir()
    kept.write_text(json.dumps({"failed": 100.0, "gone": 7.0}))
    passed = Job("passed", [], tmp_path / "a.xml", tmp_path / "a.log", code=0, seconds=12.34)
    failed = Job("failed", [], tmp_path / "b.xml", tmp_path / "b.log", code=1, seconds=3.0)
    write_times([passed, failed], kept)
    assert read_times(kept) == {"passed": 12.3, "failed": 100.0, "gone": 7.0}
    seed = tmp_path / "seed.json"
    seed.write_text(json.dumps({"passed": 1.0, "seeded": 5, "bad": "x"}))
    assert read_times(kept, seed) == {"passed": 12.3, "failed": 100.0, "gone": 7.0, "seeded": 5.0}
    (tmp_path / "broken.json").write_text("{")
    assert read_times(tmp_path / "broken.json", tmp_path / "none.json") == {}


def test_the_monotonic_clock_of_the_jobs_is_the_tests_own() -> None:
    """The spans above compare clocks of different processes: CLOCK_MONOTONIC is the machine's."""
    assert abs(time.monotonic() - time.clock_gettime(time.CLOCK_MONOTONIC)) < 1
