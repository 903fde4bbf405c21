"""The GPU quota work's behaviour in process (issue 66's in-process tier): the whole loop (the
view's watch of the quotas, the Lease, the watches of pods and claims, the queue, the turns,
the Events) against the in-memory API (tests/support/memory_api.py), in seconds instead of a
control plane's minutes. tests/e2e/test_gpu_quotas.py keeps the same behaviour on real
kube-apiservers (1.34 and 1.38) with the chart's policies and RBAC; this tier shows what the
loop does when watches break, history is compacted, a second replica waits, or a tenant
deletes pods, each at an exact point."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from hami_dra_webhook.cluster.quota.lease import Lease
from hami_dra_webhook.cluster.quota.view import QuotaView
from hami_dra_webhook.cluster.quota.work import QuotaGate
from hami_dra_webhook.core.quota.gpu_quota import GATE, HELD_LABEL, HELD_LABEL_VALUE, quota_keys
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from hami_dra_webhook.kube.port import ApiError, paths
from tests.support.loop import run
from tests.support.memory_api import MemoryApi

MEM = "limits.nvidia.com/gpumem"
TEAM, SYSTEM = "team", "hami-system"


def _pod(name: str, mib: int = 1000) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(mib)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {HELD_LABEL: HELD_LABEL_VALUE}},
        "spec": {
            "containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}],
            "schedulingGates": [{"name": GATE}],
        },
    }


def _cluster(hard: int, pods: int) -> MemoryApi:
    api = MemoryApi()
    api.namespaces(TEAM, SYSTEM)
    _set_quota(api, hard)
    for index in range(pods):
        api.put(paths.pods(TEAM), _pod(f"p{index}"))
    return api


def _set_quota(api: MemoryApi, hard: int) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpu", "namespace": TEAM},
        "spec": {"hard": {MEM: str(hard)}},
    }
    found = api.objects(paths.resource_quotas(TEAM))
    if not found:
        api.put(paths.resource_quotas(TEAM), body)
        return
    body["metadata"]["resourceVersion"] = found[0]["metadata"]["resourceVersion"]
    api.replace(paths.resource_quotas(TEAM), body)


def _released(api: MemoryApi) -> list[str]:
    return sorted(
        p["metadata"]["name"]
        for p in api.objects(paths.pods(TEAM))
        if not any(g.get("name") == GATE for g in p["spec"].get("schedulingGates") or [])
    )


def _replica(api: MemoryApi, identity: str) -> tuple[QuotaView, QuotaGate]:
    """A replica's view and work, as server/jobs.py builds them (a 3 s Lease)."""
    view = QuotaView(api, quota_keys(DEFAULT_POLICY))  # type: ignore[arg-type]
    lease = Lease(api, SYSTEM, "gpu-quota", identity, duration=3)  # type: ignore[arg-type]
    gate = QuotaGate(api, lambda: DEFAULT_POLICY, lease, view, interval=0.05)  # type: ignore[arg-type]
    return view, gate


class Replica:
    """One replica's quota view and quota work, running as serve runs them."""

    def __init__(self, api: MemoryApi, identity: str) -> None:
        self.view, self.gate = _replica(api, identity)
        self.tasks = [asyncio.create_task(self.view.run()), asyncio.create_task(self.gate.run())]

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


@asynccontextmanager
async def _running(api: MemoryApi, identity: str) -> AsyncIterator[QuotaGate]:
    replica = Replica(api, identity)
    try:
        yield replica.gate
    finally:
        await replica.stop()


async def _until(check: Callable[[], Any], what: str, timeout: float = 10.0) -> Any:
    ends = time.monotonic() + timeout
    while time.monotonic() < ends:
        found = check()
        if found:
            return found
        await asyncio.sleep(0.02)
    raise AssertionError(f"not within {timeout} s: {what}")


async def _settled(api: MemoryApi, released: int) -> list[str]:
    """The pods released once `released` are, checked again after a few more turns."""
    await _until(lambda: len(_released(api)) >= released, f"{released} pods released")
    await asyncio.sleep(0.3)
    out = _released(api)
    assert len(out) == released, out
    return out


def _said(api: MemoryApi, pod: str) -> list[str]:
    return [
        e["message"]
        for e in api.objects(paths.events(TEAM))
        if e["involvedObject"]["name"] == pod and e["reason"] == "GPUQuotaExceeded"
    ]


def test_exactly_what_fits_is_released_and_a_delete_makes_room() -> None:
    async def scenario() -> None:
        api = _cluster(hard=8000, pods=20)
        async with _running(api, "a"):
            out = await _settled(api, 8)
            held = next(p for p in (f"p{i}" for i in range(20)) if p not in out)
            words = await _until(lambda: _said(api, held), "a Warning Event on a held pod")
            assert (
                "exceeded quota: gpu, requested: limits.nvidia.com/gpumem=1000, used:"
                " limits.nvidia.com/gpumem=8000, limited: limits.nvidia.com/gpumem=8000"
            ) in words[0]
            namespace = api.objects(paths.namespace(TEAM))[0]
            assert namespace["metadata"]["labels"]["hami.io/gpu-quota"]  # the namespace label
            for name in out[:2]:  # a tenant deletes two running pods: two held ones follow
                api.delete(paths.pod(TEAM, name))
            await _settled(api, 8)
            assert len(api.objects(paths.pods(TEAM))) == 18

    run(scenario())


def test_a_broken_watch_and_a_compacted_history_lose_nothing() -> None:
    """The view's and the work's watches break (a restarted kube-apiserver) after the history
    they would resume from is compacted: they list again (410), and a quota raised meanwhile
    releases as many more pods as now fit."""

    async def scenario() -> None:
        api = _cluster(hard=4000, pods=10)
        async with _running(api, "a") as gate:
            await _settled(api, 4)
            starts = gate.view.watched.starts
            api.break_watches(ApiError(0, "Disconnected", "the server went away"))
            _set_quota(api, 6000)
            api.compact()  # gone from the history before any watch hears of it
            await _settled(api, 6)
            await _until(lambda: gate.view.watched.starts > starts, "the quotas listed again")

    run(scenario())


def test_two_replicas_one_works_and_the_other_takes_over() -> None:
    """Two replicas: the first holds the Lease and releases; it stops (as a pod deleted);
    the second takes the Lease and goes on, never over the quota."""

    async def scenario() -> None:
        api = _cluster(hard=3000, pods=6)
        first = Replica(api, "a")
        await _settled(api, 3)
        assert _holder(api) == "a"
        second = Replica(api, "b")
        await asyncio.sleep(0.2)
        assert len(_released(api)) == 3  # the second waits: nothing more released
        await first.stop()
        api.delete(paths.pod(TEAM, _released(api)[0]))
        await _settled(api, 3)  # released by the second, within the Lease's 3 s
        assert _holder(api) == "b"
        await second.stop()

    run(scenario())


def _holder(api: MemoryApi) -> str:
    return str(api.objects(paths.leases(SYSTEM))[0]["spec"].get("holderIdentity") or "")
