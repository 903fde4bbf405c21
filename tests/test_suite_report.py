"""The suite's report (tests/support/suite.py): each run's slowest tests read from its JUnit
report, slowest first, and a run without a report names none."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.suite import CpuClock, Run

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="3" failures="0" errors="0" skipped="0">
<testcase classname="tests.a" name="test_quick" time="0.2"/>
<testcase classname="tests.b" name="test_slow[1.37]" time="41.5"/>
<testcase classname="tests.c" name="test_middle" time="3.0"/>
</testsuite></testsuites>
"""


def test_the_slowest_tests_of_a_run_come_first(tmp_path: Path) -> None:
    junit = tmp_path / "run.xml"
    junit.write_text(REPORT)
    assert Run("r", junit).slowest(2) == [
        (41.5, "tests.b::test_slow[1.37]"),
        (3.0, "tests.c::test_middle"),
    ]
    assert Run("r", junit).counts() == (3, 0, 0)
    assert Run("gone", tmp_path / "none.xml").slowest(5) == []


def test_the_machines_cpu_time_is_read_from_proc_stat(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    ticks = os.sysconf("SC_CLK_TCK")
    # user nice system idle iowait irq softirq steal guest guest_nice
    stat.write_text(f"cpu  {3 * ticks} 0 {ticks} {5 * ticks} {ticks} 0 0 0 0 0\ncpu0 1 2 3\n")
    assert CpuClock.read(stat) == CpuClock(busy=4.0, idle=6.0)
    stat.write_text("intr 1 2 3\n")
    assert CpuClock.read(stat) is None
    assert CpuClock.read(tmp_path / "none") is None
