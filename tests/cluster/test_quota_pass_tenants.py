"""Issue 61 (red team, round five): the quota pass against what a tenant does through the real
kube-apiserver (the shared 1.36 control plane), run in this process so that what it asks and
writes can be counted and a tenant's move put exactly between its read and its write.

The cluster is shared by other tests, so the pass is shown only this test's namespaces: its
quotas, its namespaces and its labelled pods (`Scoped`, which passes every other call to the
real adapter unchanged)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from hami_dra_webhook.cluster.quota.lease import Lease
from hami_dra_webhook.cluster.quota.view import QuotaView
from hami_dra_webhook.cluster.quota.work import QuotaGate
from hami_dra_webhook.cluster.state import read_facts
from hami_dra_webhook.core.quota.gpu_quota import GATE, HELD_LABEL, HELD_LABEL_VALUE, quota_keys
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY, Policy, policy_from_mapping
from hami_dra_webhook.core.vendors.facts import with_cluster_facts
from hami_dra_webhook.kube.port import ApiError, paths
from tests.support.cluster import Cluster
from tests.support.loop import run

pytestmark = pytest.mark.plane  # the shared control plane (tests/conftest.py)

MEM = "limits.nvidia.com/gpumem"
GPU = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}


@dataclass
class Scoped:
    """The real adapter, with the cluster-wide lists the pass makes narrowed to `namespaces`;
    it counts the pods patched and the namespaces whose pods are read."""

    api: Any
    namespaces: set[str]
    patched: Counter[str] = field(default_factory=Counter)
    read: Counter[str] = field(default_factory=Counter)
    order: list[str] = field(default_factory=list)  # the namespaces read, in turn
    before_patch: Any = None  # called with (namespace, name) before a pod's patch goes

    def __getattr__(self, name: str) -> Any:
        return getattr(self.api, name)

    async def list_path(self, path: str, query: Any, *, timeout: float) -> list[Any]:
        found = await self.api.list_path(path, query, timeout=timeout)
        if path == paths.NAMESPACES:
            return [n for n in found if n["metadata"]["name"] in self.namespaces]
        return found

    async def list_versioned(self, path: str, query: Any, *, timeout: float) -> Any:
        found, version = await self.api.list_versioned(path, query, timeout=timeout)
        if path == paths.RESOURCE_QUOTAS:
            found = [q for q in found if q["metadata"]["namespace"] in self.namespaces]
        return found, version

    async def path_pages(self, path: str, query: Any, *, timeout: float) -> AsyncIterator[Any]:
        async for page in self.api.path_pages(path, query, timeout=timeout):
            ours = path != paths.ALL_PODS
            yield [p for p in page if ours or p["metadata"]["namespace"] in self.namespaces]

    async def watch_path(self, path: str, query: Any, *args: Any, **options: Any) -> Any:
        async for event in self.api.watch_path(path, query, *args, **options):
            item = event.get("object")
            where = (item or {}).get("metadata", {}).get("namespace") if item else None
            if where is None or where in self.namespaces or path.startswith("/apis/coord"):
                yield event

    def pod_pages(self, namespace: str, **options: Any) -> AsyncIterator[Any]:
        self.read[namespace] += 1
        self.order.append(namespace)
        return self.api.pod_pages(namespace, **options)

    async def patch_pod(self, namespace: str, name: str, ops: Any, *, timeout: float) -> Any:
        self.patched[namespace] += 1
        if self.before_patch is not None:
            await self.before_patch(namespace, name)
        return await self.api.patch_pod(namespace, name, ops, timeout=timeout)


def _gate(api: Scoped, lease_namespace: str, policy: Policy = DEFAULT_POLICY) -> QuotaGate:
    lease = Lease(api, lease_namespace, "quota-test", "test")  # type: ignore[arg-type]
    view = QuotaView(api, quota_keys(policy))  # type: ignore[arg-type]
    return QuotaGate(api, lambda: policy, lease, view)  # type: ignore[arg-type]


async def _pass(gate: QuotaGate) -> Any:
    assert await gate.lease.hold()
    await gate.view.refresh()  # what its watch would have by now
    return await gate.run_pass()


def _quota(kube: Cluster, namespace: str, hard: dict[str, str]) -> None:
    body = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu"}}
    kube.apply({**body, "spec": {"hard": hard}}, namespace=namespace)


def _pod(name: str, limits: dict[str, str] | None, held: bool, labelled: bool) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "x"}
    if limits:
        container["resources"] = {"limits": limits}
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {HELD_LABEL: HELD_LABEL_VALUE} if labelled else {}},
        # nowhere to run: the tests read what the pass did, not what the scheduler does
        "spec": {"containers": [container], "nodeSelector": {"e2e.hami.io/nowhere": "yes"}},
    }
    if held:
        pod["spec"]["schedulingGates"] = [{"name": GATE}]
    return pod


def _gated(kube: Cluster, namespace: str, name: str) -> bool:
    gates = kube.pod(namespace, name)["spec"].get("schedulingGates") or []
    return any(g["name"] == GATE for g in gates)


@pytest.fixture
def namespaces(kube: Cluster) -> Any:
    made = [kube.create_namespace("quota") for _ in range(3)]
    yield made
    for name in made:
        kube.release_namespace(name)


def test_a_pod_made_again_under_a_held_pods_name_is_not_released_by_name(
    kube: Cluster, real_api: Any, namespaces: list[str]
) -> None:
    """Finding: held pods deleted and created again under their names asking more were
    released by name. Here the tenant's move lands between the pass's count and its write:
    kube-apiserver refuses the release (its uid is not the pod's), and the new pod stays held
    until a pass counts it (over the quota: held)."""
    tenant, lease_namespace, _ = namespaces
    _quota(kube, tenant, {MEM: "8000"})
    kube.apply(_pod("p", GPU, held=True, labelled=True), namespace=tenant)
    api = Scoped(real_api, {tenant})
    bigger = _pod("p", {**GPU, "nvidia.com/gpumem": "80000"}, held=True, labelled=True)

    async def replace(namespace: str, name: str) -> None:
        api.before_patch = None
        await real_api.delete_path(paths.pod(namespace, name), timeout=10)
        while True:  # gone (no kubelet: deleted at once, graceless for an unscheduled pod)
            try:
                await real_api.get_path(paths.pod(namespace, name), timeout=10)
            except ApiError:  # 404
                break
        await real_api.create_object(paths.pods(namespace), bigger, timeout=10)

    api.before_patch = replace
    gate = _gate(api, lease_namespace)
    report = run(_pass(gate))
    assert api.patched[tenant] == 1 and report.released == 1  # decided on the first pod
    assert _gated(kube, tenant, "p")  # the new one: the patch's uid test failed
    report = run(_pass(gate))
    assert report.released == 0 and _gated(kube, tenant, "p")
    assert [h.key for h in report.held] == [MEM]


async def _released(api: Any, namespace: str, name: str, within: float = 30.0) -> float:
    """Seconds until the pod has no GPU quota gate (fails after `within`)."""
    started = time.monotonic()
    while time.monotonic() - started < within:
        pod = await api.get_path(paths.pod(namespace, name), timeout=10)
        if GATE not in [g["name"] for g in pod["spec"].get("schedulingGates", [])]:
            return time.monotonic() - started
        await asyncio.sleep(0.05)
    raise AssertionError(f"{namespace}/{name} still held after {within:g}s")


def test_pods_a_tenant_labels_held_delay_no_other_release(
    kube: Cluster, real_api: Any, namespaces: list[str]
) -> None:
    """Finding: 1,500 cheap pods labelled `hami.io/gpu-quota=held` (the label is the tenant's
    to write) made the pass read their namespace and patch each of them every second, and other
    tenants' releases waited 13-52 s. Here the work runs as it does in the webhook (the Lease,
    the watches, the queue): 200 label-only pods and 40 held ones over the quota in the
    tenant's namespace; the victim's pod is released at once, again after a pod of the victim's
    ends, and none of the tenant's pods is written to but the 8 that fit its quota."""
    tenant, victim, lease_namespace = namespaces
    for namespace in (tenant, victim):
        _quota(kube, namespace, {MEM: "1000" if namespace == victim else "8000"})
    cheap = [_pod(f"cheap-{i}", None, held=False, labelled=True) for i in range(200)]
    cheap += [_pod(f"gpu-{i}", GPU, held=True, labelled=True) for i in range(40)]
    kube.apply({"apiVersion": "v1", "kind": "List", "items": cheap}, namespace=tenant)
    api = Scoped(real_api, {tenant, victim})
    gate = _gate(api, lease_namespace)

    async def scenario() -> tuple[float, float]:
        view, leading = (
            asyncio.ensure_future(gate.view.run()),
            asyncio.ensure_future(gate.run()),
        )
        try:
            await api.create_object(paths.pods(victim), _pod("first", GPU, True, True), timeout=10)
            first = await _released(real_api, victim, "first")
            await api.create_object(paths.pods(victim), _pod("second", GPU, True, True), timeout=10)
            await asyncio.sleep(1.5)  # counted, over the quota: it waits
            await real_api.delete_path(paths.pod(victim, "first"), timeout=10)
            return first, await _released(real_api, victim, "second")
        finally:
            for task in (leading, view):
                task.cancel()
            await asyncio.gather(leading, view, return_exceptions=True)

    first, after_delete = run(scenario())
    print(f"released in {first:.2f}s; after the pod before it ended, in {after_delete:.2f}s")
    assert api.patched[victim] == 2
    assert api.patched[tenant] == 8  # the 8 of 1000 MiB its 8000 let go, nothing else
    pods = kube.pods(tenant)
    labels = [p["metadata"].get("labels") for p in pods if p["metadata"]["name"] < "gpu"]
    assert len(labels) == 200 and all(found == {HELD_LABEL: HELD_LABEL_VALUE} for found in labels)


def test_a_count_only_pod_left_to_kube_scheduler_is_charged_the_published_cards(
    kube: Cluster, real_api: Any, namespaces: list[str]
) -> None:
    """Finding (availability): with wholeGpusByExtendedResource and a memory quota, a
    count-only pod stayed held "no card size is known" although the driver publishes them.
    The pass's policy has the card sizes the stand-in GPU node's slices publish (as the
    webhook's cluster check reads them), and the pod is charged its whole card."""
    tenant, lease_namespace, _ = namespaces
    bridge = policy_from_mapping({"hamiDraWebhook": {"wholeGpusByExtendedResource": True}}).policy
    facts = run(read_facts(real_api, bridge, 10))
    policy = with_cluster_facts(bridge, facts, True)
    _quota(kube, tenant, {MEM: "90000"})
    for name in ("first", "second"):
        kube.apply(_pod(name, {"nvidia.com/gpu": "1"}, held=True, labelled=True), namespace=tenant)
    report = run(_pass(_gate(Scoped(real_api, {tenant}), lease_namespace, policy)))
    assert report.released == 1, [h.reason for h in report.held]  # 81920 MiB, the largest card
    (held,) = report.held
    assert "requested: limits.nvidia.com/gpumem=81920, used: limits.nvidia.com/gpumem=81920" in (
        held.reason
    )


def test_no_pod_is_released_before_the_quotas_are_listed(
    kube: Cluster, real_api: Any, namespaces: list[str]
) -> None:
    """The work may hold the Lease before the replica's view of the ResourceQuotas has listed
    them (both start with the process): a namespace whose quota is not known yet must not count
    as one without a quota (every held pod of it would go). It waits; once the view stands,
    exactly what fits is released."""
    tenant, lease_namespace, _ = namespaces
    _quota(kube, tenant, {MEM: "3000"})
    held = [_pod(f"gpu-{i}", GPU, held=True, labelled=True) for i in range(6)]
    kube.apply({"apiVersion": "v1", "kind": "List", "items": held}, namespace=tenant)
    api = Scoped(real_api, {tenant})
    gate = _gate(api, lease_namespace)

    async def scenario() -> None:
        leading = asyncio.ensure_future(gate.run())
        view: asyncio.Future[None] | None = None
        try:
            await asyncio.sleep(2.0)  # the Lease taken, the held pods known: nothing released
            assert gate.lease.held and api.patched[tenant] == 0
            view = asyncio.ensure_future(gate.view.run())
            started = time.monotonic()
            while api.patched[tenant] < 3 and time.monotonic() - started < 20:
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.0)  # and no more
        finally:
            for task in (leading, view):
                if task is not None:
                    task.cancel()
            await asyncio.gather(*(t for t in (leading, view) if t), return_exceptions=True)

    run(scenario())
    assert api.patched[tenant] == 3  # 3 of 1000 MiB fit its 3000
