"""The server's tests measure latencies: say at the start how much slower than the reference
machine this one runs the webhook's work (the latency bounds are scaled by it)."""

from __future__ import annotations

from tests.support.attack import MAX_SLOWDOWN, REFERENCE_LOOP_US, machine_slowdown


def pytest_report_header() -> str:
    return (
        f"machine slowdown {machine_slowdown():.2f} against the reference machine"
        f" (tests.support.attack.calibration_loop, {REFERENCE_LOOP_US} us there; at"
        f" most {MAX_SLOWDOWN}): the hostile-caller tests' latency bounds are scaled by it"
    )
