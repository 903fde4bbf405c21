"""The GPU quota work's Lease (cluster/quota/lease.py) between two replicas, in process on the real
kube-apiserver (the shared 1.36 control plane): one works at a time; on shutdown the holder
releases it and the other, which watches it, takes it at once; a holder that stops renewing
(killed) is replaced once the Lease's duration has passed; a holder that sees another's write
stops its work at once. The chart's replicas as processes, SIGTERM and SIGKILL, are
tests/e2e/test_quota_handover.py."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from hami_dra_webhook.cluster.quota.lease import Lease
from hami_dra_webhook.kube.port import paths
from tests.support.cluster import Cluster
from tests.support.loop import run

pytestmark = pytest.mark.plane  # the shared control plane (tests/conftest.py)


class Worker:
    """What a replica runs while it holds the Lease: notes when it started and stopped."""

    def __init__(self, name: str, log: list[tuple[str, str, float]]) -> None:
        self.name, self.log = name, log

    async def work(self) -> None:
        self.log.append((self.name, "start", time.monotonic()))
        try:
            await asyncio.sleep(3600)
        finally:
            self.log.append((self.name, "stop", time.monotonic()))


async def _until(check: Any, within: float = 20.0) -> float:
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < within, "timed out"
        await asyncio.sleep(0.02)
    return time.monotonic() - started


def _working(log: list[tuple[str, str, float]]) -> set[str]:
    state: dict[str, bool] = {}
    for name, what, _ in log:
        state[name] = what == "start"
    return {name for name, on in state.items() if on}


def test_one_replica_works_and_a_release_hands_over_at_once(kube: Cluster, real_api: Any) -> None:
    namespace = kube.create_namespace("lease")
    log: list[tuple[str, str, float]] = []

    async def scenario() -> tuple[float, float]:
        a = Lease(real_api, namespace, "work", "a", duration=4)
        b = Lease(real_api, namespace, "work", "b", duration=4)
        leading_a = asyncio.ensure_future(a.lead(Worker("a", log).work))
        await _until(lambda: _working(log) == {"a"})
        leading_b = asyncio.ensure_future(b.lead(Worker("b", log).work))
        await asyncio.sleep(2 * a.duration)  # renewed on its own loop: b waits
        assert _working(log) == {"a"} and b.transitions == 0
        leading_a.cancel()  # shutdown: a releases it
        await asyncio.gather(leading_a, return_exceptions=True)
        taken = await _until(lambda: _working(log) == {"b"})
        # Killed: b stops renewing and releases nothing (what it last wrote is forgotten).
        b._current = None
        leading_b.cancel()
        await asyncio.gather(leading_b, return_exceptions=True)
        c = Lease(real_api, namespace, "work", "c", duration=4)
        leading_c = asyncio.ensure_future(c.lead(Worker("c", log).work))
        after_kill = await _until(lambda: "c" in _working(log), within=30)
        leading_c.cancel()
        await asyncio.gather(leading_c, return_exceptions=True)
        return taken, after_kill

    try:
        taken, after_kill = run(scenario())
    finally:
        kube.release_namespace(namespace)
    print(f"handed over {taken:.2f}s after a release; {after_kill:.2f}s after a kill")
    assert taken < 2.0
    assert 2.0 <= after_kill <= 4.0 + 3.0  # its duration (4 s) after the last renewal


def test_a_holder_that_sees_another_write_stops_at_once(kube: Cluster, real_api: Any) -> None:
    """Another identity writes the Lease (a replica that did not see this one's renewal, or an
    administrator): the holder's next renewal fails and its work is cancelled."""
    namespace = kube.create_namespace("lease")
    log: list[tuple[str, str, float]] = []

    async def scenario() -> None:
        a = Lease(real_api, namespace, "work", "a", duration=3)
        leading = asyncio.ensure_future(a.lead(Worker("a", log).work))
        await _until(lambda: _working(log) == {"a"})
        current = await real_api.get_path(paths.lease(namespace, "work"), timeout=10)
        current["spec"] |= {"holderIdentity": "intruder", "leaseDurationSeconds": 3600}
        await real_api.replace_object(paths.leases(namespace), current, timeout=10)
        await _until(lambda: not _working(log), within=a.duration)
        leading.cancel()
        await asyncio.gather(leading, return_exceptions=True)

    try:
        run(scenario())
    finally:
        kube.release_namespace(namespace)
