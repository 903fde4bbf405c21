"""Issue 61 (red team, round five): the quota pass against what a tenant does through the real
kube-apiserver (the shared 1.36 control plane), run in this process so that what it asks and
writes can be counted and a tenant's move put exactly between its read and its write.

The cluster is shared by other tests, so the pass is shown only this test's namespaces: its
quotas, its namespaces and its labelled pods (`Scoped`, which passes every other call to the
real adapter unchanged)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from hami_dra_webhook.cluster.lease import Lease
from hami_dra_webhook.cluster.quota_gate import QuotaGate
from hami_dra_webhook.cluster.state import read_facts
from hami_dra_webhook.core.quota.gpu_quota import GATE, HELD_LABEL, HELD_LABEL_VALUE
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY, Policy, policy_from_mapping
from hami_dra_webhook.core.vendors.facts import with_cluster_facts
from hami_dra_webhook.kube.port import ApiError, paths
from tests.support.cluster import Cluster
from tests.support.loop import run

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
        if path == paths.RESOURCE_QUOTAS:
            return [q for q in found if q["metadata"]["namespace"] in self.namespaces]
        return found

    async def path_pages(self, path: str, query: Any, *, timeout: float) -> AsyncIterator[Any]:
        async for page in self.api.path_pages(path, query, timeout=timeout):
            ours = path != paths.ALL_PODS
            yield [p for p in page if ours or p["metadata"]["namespace"] in self.namespaces]

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
    return QuotaGate(api, lambda: policy, lease)  # type: ignore[arg-type]


async def _pass(gate: QuotaGate) -> Any:
    assert await gate.lease.hold()
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


def test_pods_a_tenant_labels_held_send_the_pass_nowhere(
    kube: Cluster, real_api: Any, namespaces: list[str]
) -> None:
    """Finding: cheap pods labelled `hami.io/gpu-quota=held` (the label is the tenant's to
    write) made the pass read their namespace every second and patch each of them, and other
    tenants' releases waited. Now a labelled pod without the gate is neither read for nor
    written to; the tenant's really held pods (over its quota) are counted after the victim's
    namespace, the cheaper one, and the victim's pod is released in the first pass."""
    tenant, victim, lease_namespace = namespaces
    for namespace in (tenant, victim):
        _quota(kube, namespace, {MEM: "8000"})
    cheap = [_pod(f"cheap-{i}", None, held=False, labelled=True) for i in range(200)]
    cheap += [_pod(f"gpu-{i}", GPU, held=True, labelled=True) for i in range(40)]
    kube.apply({"apiVersion": "v1", "kind": "List", "items": cheap}, namespace=tenant)
    kube.apply(_pod("waits", GPU, held=True, labelled=True), namespace=victim)
    api = Scoped(real_api, {tenant, victim})
    gate = _gate(api, lease_namespace)
    run(_pass(gate))  # the first pass reads every quota namespace whole (the resync)
    api.read.clear()
    api.patched.clear()
    api.order.clear()
    kube.kubectl("delete", "pod", "waits", "-n", victim, "--grace-period=0", "--force")
    kube.apply(_pod("waits", GPU, held=True, labelled=True), namespace=victim)
    started = time.monotonic()
    report = run(_pass(gate))
    print(f"the victim's pod released in a pass of {time.monotonic() - started:.2f}s")
    assert report.released == 1 and not _gated(kube, victim, "waits")
    assert api.order == [victim, tenant]  # the tenant's 240 pods after the victim's one
    assert api.patched == Counter({victim: 1})  # the tenant's 32 over its quota stay held
    # Not one of the tenant's label-only pods written to (kube-scheduler writes their status).
    pods = kube.pods(tenant)
    labels = [p["metadata"].get("labels") for p in pods if p["metadata"]["name"] < "gpu"]
    assert len(labels) == 200 and all(found == {HELD_LABEL: HELD_LABEL_VALUE} for found in labels)
    gated = [p for p in pods if GATE in [g["name"] for g in p["spec"].get("schedulingGates", [])]]
    assert len(gated) == 40 - 8  # 8 of 1000 MiB fit its 8000


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
