"""The GPU pools without a cluster: what serves a node, the scope a webhook configuration
applies, capacity left on devices, first-fit placement, and the plan of a node move."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from hami_dra_webhook.core.migration.holdings import ClaimIndex
from hami_dra_webhook.core.migration.pool_plan import Inventory, gpu_pod, plan_move
from hami_dra_webhook.core.migration.pools import (
    Free,
    Need,
    Scope,
    allocated,
    node_gpus,
    slice_devices,
    template_needs,
)
from hami_dra_webhook.core.model.claim_view import ClaimView
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY

DRIVER = "hami-core-gpu.project-hami.io"
GIB = 1024**3
MIB = 1024**2
EVERY_POD = Scope("all")


def node(name: str, slots: int = 0, pool: str = "", unschedulable: bool = False) -> dict[str, Any]:
    labels = {"nvidia.com/gpu.present": "true"} | ({"hami.io/gpu-pool": pool} if pool else {})
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"unschedulable": unschedulable},
        "status": {"allocatable": {"nvidia.com/gpu": str(slots)} if slots else {}},
    }


def resource_slice(node_name: str, *memories: str) -> dict[str, Any]:
    return {
        "spec": {
            "driver": DRIVER,
            "nodeName": node_name,
            "pool": {"name": node_name},
            "devices": [
                {
                    "name": f"hami-gpu-{i}",
                    "capacity": {"memory": {"value": m}, "cores": {"value": "100"}},
                }
                for i, m in enumerate(memories)
            ],
        }
    }


def claim(
    namespace: str, name: str, node_name: str, device: str, **consumed: str
) -> dict[str, Any]:
    result: dict[str, Any] = {"driver": DRIVER, "pool": node_name, "device": device}
    if consumed:
        result["consumedCapacity"] = consumed
    return {
        "metadata": {"namespace": namespace, "name": name},
        "status": {"allocation": {"devices": {"results": [result]}}},
    }


def legacy_pod(name: str, node_name: str, namespace: str = "ns", **limits: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app": "a"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "a-1", "controller": True}],
        },
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "resources": {"limits": limits or {"nvidia.com/gpu": 1}}}],
        },
        "status": {"phase": "Running"},
    }


def inventory(
    nodes: list[dict[str, Any]],
    slices: list[dict[str, Any]],
    pods: Sequence[dict[str, Any]] = (),
    claims: Sequence[dict[str, Any]] = (),
    scope: Scope = EVERY_POD,
    namespace_labels: dict[str, dict[str, str]] | None = None,
    budgets: Sequence[dict[str, Any]] = (),
) -> Inventory:
    """As cluster/moves/inventory.py builds it from what it reads."""
    devices = [d for s in slices for d in slice_devices(s)]
    by_name = {
        n["metadata"]["name"]: node_gpus(
            n, "nvidia.com/gpu", [d for d in devices if d.node == n["metadata"]["name"]]
        )
        for n in nodes
    }
    index = ClaimIndex.of(claims, DRIVER)
    found = [p for p in (gpu_pod(pod, DEFAULT_POLICY, index) for pod in pods) if p]
    for pod in found:
        if pod.node in by_name:
            by_name[pod.node].pods += 1
            if pod.holds_legacy:
                by_name[pod.node].legacy_used += pod.legacy_count
    return Inventory(
        by_name,
        allocated(index.by_name.values(), DRIVER),
        found,
        namespace_labels or {},
        list(budgets),
        scope,
    )


def test_what_serves_a_node_decides_its_pool() -> None:
    both = node_gpus(
        node("a", slots=20), "nvidia.com/gpu", slice_devices(resource_slice("a", "24Gi"))
    )
    assert both.served_by == ("legacy", "dra") and both.pool == ""
    assert node_gpus(node("b", slots=20), "nvidia.com/gpu", []).pool == "legacy"
    assert node_gpus(node("c", pool="dra"), "nvidia.com/gpu", []).pool == "dra"
    assert node_gpus(node("d"), "nvidia.com/gpu", []).pool == ""
    plain = {"metadata": {"name": "cpu"}, "status": {}}
    assert not node_gpus(plain, "nvidia.com/gpu", []).gpu_node


@pytest.mark.parametrize(
    ("webhook", "mode"),
    [
        ({}, "all"),
        ({"namespaceSelector": {"matchExpressions": [{"key": "hami.io/gpu-migration", "operator": "In", "values": ["dra"]}]}}, "namespaces"),
        ({"objectSelector": {"matchExpressions": [{"key": "hami.io/gpu-migration", "operator": "In", "values": ["dra"]}]}}, "workloads"),
        ({"objectSelector": {"matchLabels": {"hami.io/gpu-migration": "dra"}}}, "workloads"),
        ({"objectSelector": {"matchExpressions": [{"key": "hami.io/webhook", "operator": "NotIn", "values": ["ignore"]}]}}, "all"),
    ],
)  # fmt: skip
def test_the_scope_is_read_from_the_webhook_configuration(
    webhook: dict[str, Any], mode: str
) -> None:
    assert Scope.of_webhook(webhook).mode == mode


def test_a_scope_converts_opted_in_namespaces_or_pods() -> None:
    opted = {"hami.io/gpu-migration": "dra"}
    assert Scope("all").converts({}, {})
    assert Scope("namespaces").converts(opted, {}) and not Scope("namespaces").converts({}, opted)
    assert Scope("workloads").converts({}, opted) and not Scope("workloads").converts(opted, {})


def test_allocations_take_their_consumed_capacity_or_the_whole_device() -> None:
    used = allocated(
        [
            ClaimView.of(claim("n", "a", "gpu-1", "hami-gpu-0", memory="3000Mi", cores="30")),
            ClaimView.of(claim("n", "b", "gpu-1", "hami-gpu-0", memory="1Gi", cores="10")),
            ClaimView.of(claim("n", "c", "gpu-1", "hami-gpu-1")),
        ],
        DRIVER,
    )
    assert (used["gpu-1", "hami-gpu-0"].memory, used["gpu-1", "hami-gpu-0"].cores) == (
        3000 * MIB + GIB,
        40,
    )
    assert used["gpu-1", "hami-gpu-1"].cores == 100


def test_first_fit_places_on_free_capacity_and_takes_it() -> None:
    found = inventory(
        [node("gpu-1", pool="dra"), node("gpu-2", pool="dra")],
        [resource_slice("gpu-1", "24Gi"), resource_slice("gpu-2", "24Gi", "24Gi")],
        claims=[claim("n", "a", "gpu-1", "hami-gpu-0", memory="20Gi", cores="50")],
    )
    free = found.free()
    share = [[Need(8 * GIB, 30)]]
    assert free.place_dra(share) == "gpu-2"  # 4 GiB left on gpu-1
    # Two whole cards: gpu-1 has one, gpu-2 one whole and one shared; nothing is taken.
    assert free.place_dra([[Need(None, None)], [Need(None, None)]]) is None
    assert free.place_dra([[Need(None, None)]]) == "gpu-2"  # its second card, whole
    assert free.place_dra(share) == "gpu-2"  # 16 GiB left on its first card
    assert free.place_dra([[Need(10 * GIB, 10)]]) is None  # 8 GiB left there, 4 on gpu-1


def test_a_request_for_two_devices_needs_two_distinct_ones() -> None:
    free = Free.of(
        inventory([node("gpu-1", pool="dra")], [resource_slice("gpu-1", "24Gi")]).nodes.values(),
        {},
    )
    assert free.place_dra([[Need(GIB, 10), Need(GIB, 10)]]) is None


def test_cordoned_nodes_offer_nothing_and_legacy_slots_count() -> None:
    found = inventory(
        [node("l-1", slots=20, pool="legacy"), node("l-2", slots=20, unschedulable=True)],
        [],
        pods=[legacy_pod(f"p{i}", "l-1") for i in range(19)],
    )
    free = found.free()
    assert free.slots == {"l-1": 1}
    assert free.place_legacy(2) is None and free.place_legacy(1) == "l-1"


def test_a_template_asks_for_its_requests_capacity() -> None:
    template = {
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "a", "exactly": {"count": 2, "capacity": {"requests": {"memory": "3000Mi", "cores": "30"}}}},
                        {"name": "b", "exactly": {}},
                    ]
                }
            }
        }
    }  # fmt: skip
    assert template_needs(template) == [[Need(3000 * MIB, 30)] * 2, [Need(None, None)]]


def test_the_plan_of_a_move_says_where_each_pod_goes() -> None:
    """Three legacy pods on the legacy node: the opted-in namespace's convert onto the DRA
    node's free capacity, the other's stay legacy on the other legacy node, a bare pod is
    marked, a PodDisruptionBudget with no disruption allowed is named."""
    budget = {
        "metadata": {"namespace": "in", "name": "pdb"},
        "spec": {"selector": {"matchLabels": {"app": "a"}}},
        "status": {"disruptionsAllowed": 0},
    }
    bare = legacy_pod("bare", "l-1", namespace="out")
    bare["metadata"].pop("ownerReferences")
    found = inventory(
        [node("l-1", slots=20, pool="legacy"), node("l-2", slots=20, pool="legacy"), node("d-1", pool="dra")],
        [resource_slice("d-1", "24Gi")],
        pods=[
            legacy_pod("share", "l-1", namespace="in", **{"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000, "nvidia.com/gpucores": 30}),
            legacy_pod("whole", "l-1", namespace="in"),
            legacy_pod("other", "l-1", namespace="out"),
            bare,
        ],
        scope=Scope("namespaces"),
        namespace_labels={"in": {"hami.io/gpu-migration": "dra"}},
        budgets=[budget],
    )  # fmt: skip
    plan = {step.name: step for step in plan_move(found, "l-1", "dra", DEFAULT_POLICY)}
    assert plan["share"].goes == "converted onto DRA node d-1" and plan["share"].fits
    assert plan["share"].budgets == ["pdb"]
    # The whole card is no longer free once `share` took 3000 MiB of it.
    assert not plan["whole"].fits and plan["whole"].goes.startswith("nowhere: converted")
    assert plan["other"].goes == "legacy node l-2 (not in the migration scope: stays legacy)"
    assert plan["bare"].lost and plan["bare"].fits
