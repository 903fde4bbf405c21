"""What a pod holds, judged from the claims allocated to it and its legacy resources, never from
the `hami.io/dra` label (issue 46, finding 1): a converted pod whose tenant removed the label,
a count-only pod given a whole GPU by kube-scheduler (KEP-5004), and a pod with a claim of its
own all hold the driver's devices; a legacy pod holds the device plugin's."""

from __future__ import annotations

from typing import Any

from hami_dra_webhook.core.migration import holdings
from hami_dra_webhook.core.migration.holdings import (
    ClaimIndex,
    holds_legacy,
    node_pools,
)
from hami_dra_webhook.core.migration.pool_plan import gpu_pod, plan_move
from hami_dra_webhook.core.migration.pools import Scope
from hami_dra_webhook.core.model.claim_view import ClaimView
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from tests.core.migration.test_pools import DRIVER, inventory, legacy_pod, node, resource_slice

OWNER = [{"kind": "ReplicaSet", "name": "a-1", "controller": True}]


def pod(name: str, node_name: str = "n-1", uid: str = "", **spec: Any) -> dict[str, Any]:
    status = spec.pop("status", {})
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": uid or f"uid-{name}", "ownerReferences": OWNER},
        "spec": {"nodeName": node_name, "containers": [{"name": "c"}], **spec},
        "status": {"phase": "Running", **status},
    }  # fmt: skip


def allocated_claim(
    name: str, pool: str = "n-1", driver: str = DRIVER, reserved: str = "", **allocation: Any
) -> dict[str, Any]:
    result = {"driver": driver, "pool": pool, "device": "hami-gpu-0"}
    status: dict[str, Any] = {"allocation": {"devices": {"results": [result]}, **allocation}}
    if reserved:
        status["reservedFor"] = [{"resource": "pods", "name": reserved, "uid": f"uid-{reserved}"}]
    return {"metadata": {"namespace": "ns", "name": name}, "status": status}


UNLABELLED = pod(
    "unlabelled",
    resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "hami-gpu-0123456789abcdef"}],
    status={"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "unlabelled-gpu-x"}]},
)
BRIDGE = pod(
    "bridge",
    containers=[{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
    status={"extendedResourceClaimStatus": {"resourceClaimName": "bridge-extended-resources-y"}},
)
OWN_CLAIM = pod("own", resourceClaims=[{"name": "gpu", "resourceClaimName": "mine"}])
CLAIMS = [
    allocated_claim("unlabelled-gpu-x", consumedCapacity={}),
    allocated_claim("bridge-extended-resources-y"),
    allocated_claim("mine", reserved="own"),
]


def test_a_pod_holds_the_drivers_devices_by_its_allocated_claims_not_its_label() -> None:
    index = ClaimIndex.of(CLAIMS, DRIVER)
    for held in (UNLABELLED, BRIDGE, OWN_CLAIM):
        found = gpu_pod(held, DEFAULT_POLICY, index)
        assert found is not None, held["metadata"]["name"]
        assert found.holds_dra and found.side == "converted", held["metadata"]["name"]
        assert not found.holds_legacy, held["metadata"]["name"]
    # Without its claims allocated, the bridge pod is a legacy pod (the device plugin's).
    empty = ClaimIndex.of([], DRIVER)
    bridge = gpu_pod({**BRIDGE, "status": {"phase": "Pending"}}, DEFAULT_POLICY, empty)
    assert bridge is not None and bridge.holds_legacy and not bridge.holds_dra
    # A pending converted pod without its label is still one: it names the webhook's template.
    pending = gpu_pod({**UNLABELLED, "status": {}}, DEFAULT_POLICY, empty)
    assert pending is not None and pending.side == "converted" and not pending.holds_dra
    assert gpu_pod(OWN_CLAIM, DEFAULT_POLICY, empty) is None


def test_a_claim_is_found_by_reservation_alone_and_of_the_driver_only() -> None:
    reserved_only = pod("r")
    index = ClaimIndex.of(
        [allocated_claim("c-1", reserved="r"), allocated_claim("other", driver="gpu.example.com", reserved="r")],
        DRIVER,
    )  # fmt: skip
    assert [c.name for c in index.held_by(reserved_only)] == ["c-1"]
    unallocated = {"metadata": {"namespace": "ns", "name": "mine"}, "status": {}}
    assert ClaimIndex.of([unallocated], DRIVER).held_by(OWN_CLAIM) == []
    assert ClaimView.of(CLAIMS[2]).words() == "ns/mine (reserved for pod own)"


def test_the_legacy_side_is_legacy_resources_or_hamis_placement() -> None:
    assert holds_legacy(legacy_pod("l", "n-1"), DEFAULT_POLICY)
    assert not holds_legacy(BRIDGE, DEFAULT_POLICY)
    placed = pod("placed")
    assert not holds_legacy(placed, DEFAULT_POLICY)
    placed["metadata"]["annotations"] = {"hami.io/vgpu-node": "n-2"}
    assert not holds_legacy(placed, DEFAULT_POLICY)  # not where it is bound
    placed["metadata"]["annotations"] = {"hami.io/vgpu-node": "n-1"}
    assert holds_legacy(placed, DEFAULT_POLICY)


def test_a_claim_is_on_a_node_by_pool_node_selector_or_its_pods() -> None:
    def claim_on_node(claim: dict[str, Any], *args: Any) -> bool:
        return holdings.claim_on_node(ClaimView.of(claim), *args)

    pools = node_pools("n-1", {"n-1"})
    assert claim_on_node(allocated_claim("a"), "n-1", pools, {}, DRIVER)
    elsewhere = allocated_claim("b", pool="pool-7")
    assert not claim_on_node(elsewhere, "n-1", pools, {}, DRIVER)
    assert claim_on_node(elsewhere, "n-1", node_pools("n-1", {"pool-7"}), {}, DRIVER)
    selected = allocated_claim(
        "c",
        pool="pool-7",
        nodeSelector={
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n-1"]}]}
            ]
        },
    )
    assert claim_on_node(selected, "n-1", pools, {}, DRIVER)
    assert not claim_on_node(selected, "n-2", node_pools("n-2", ()), {}, DRIVER)
    reserved = allocated_claim("d", pool="pool-7", reserved="p")
    assert claim_on_node(reserved, "n-1", pools, {"uid-p": "n-1"}, DRIVER)
    assert not claim_on_node(reserved, "n-1", pools, {"uid-p": "n-2"}, DRIVER)
    assert not claim_on_node(allocated_claim("e", driver="x"), "n-1", pools, {}, DRIVER)


def test_a_move_to_legacy_plans_every_holder_of_the_drivers_devices() -> None:
    """The three pods the red team left on a node moved to legacy are in its plan; a legacy
    pod on the same node is not; the bridge pod uses no legacy slot."""
    found = inventory(
        [node("n-1", pool="dra"), node("d-2", pool="dra")],
        [resource_slice("n-1", "24Gi"), resource_slice("d-2", "24Gi", "24Gi")],
        pods=[UNLABELLED, BRIDGE, OWN_CLAIM, legacy_pod("legacy", "n-1")],
        claims=CLAIMS,
        scope=Scope("all"),
    )
    plan = plan_move(found, "n-1", "legacy", DEFAULT_POLICY)
    assert [step.name for step in plan] == ["bridge", "own", "unlabelled"]
    assert all(step.side == "converted" for step in plan)
    assert found.nodes["n-1"].legacy_used == 1  # the legacy pod's, not the bridge pod's
    to_dra = plan_move(found, "n-1", "dra", DEFAULT_POLICY)
    assert [step.name for step in to_dra] == ["legacy"]


def test_a_converted_pod_bound_before_its_claim_is_allocated_leaves_dra_too() -> None:
    """A pod bound to the node (spec.nodeName) whose template claim is not allocated yet is
    the DRA side's: a move to legacy evicts it; a move to DRA does not."""
    pending = {**UNLABELLED, "status": {"phase": "Pending"}}
    found = inventory(
        [node("n-1", pool="dra")], [resource_slice("n-1", "24Gi")], pods=[pending], claims=[]
    )
    assert [s.name for s in plan_move(found, "n-1", "legacy", DEFAULT_POLICY)] == ["unlabelled"]
    assert plan_move(found, "n-1", "dra", DEFAULT_POLICY) == []
