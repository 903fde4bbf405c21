"""Issue 61 (red team, round five): what a tenant writes is charged by what it can at most hold,
bounded before it is used, and every way a pod can hold the driver's devices is charged.
kube-apiserver's own count is the reference for `requests.*` keys (component-helpers'
PodRequests: sidecars beside the app containers)."""

from __future__ import annotations

from typing import Any

import pytest

from hami_dra_webhook.core.quota.claim_charge import IMPLICIT_PREFIX, claims_charge
from hami_dra_webhook.core.quota.gpu_quota import Charge, legacy_charge, limits_of, quota_keys
from hami_dra_webhook.core.quota.quota_groups import Cards, most_devices_per_node
from hami_dra_webhook.core.quota.quota_plan import plan_pass
from hami_dra_webhook.core.settings.policy import policy_from_mapping

POLICY = policy_from_mapping({"hamiDraWebhook": {"deviceMemorySizes": ["24Gi"]}}).policy
KEYS = quota_keys(POLICY)
CLASS = POLICY.webhook.device_class_name
MEM, CORES = "limits.nvidia.com/gpumem", "limits.nvidia.com/gpucores"
R_MEM, R_GPU = "requests.nvidia.com/gpumem", "requests.nvidia.com/gpu"
CARDS = Cards({"nvidia": 24576}, {"nvidia": 4})


def _claim(exact: dict[str, Any], name: str = "c") -> dict[str, Any]:
    request = {"name": "gpu", "exactly": {"deviceClassName": CLASS, **exact}}
    return {"metadata": {"name": name}, "spec": {"devices": {"requests": [request]}}}


@pytest.mark.parametrize("count", [10**12, 30_000_000, 33])
def test_an_absurd_count_is_charged_what_a_claim_can_hold_at_once(count: int) -> None:
    claim = _claim({"count": count, "capacity": {"requests": {"memory": "1Gi"}}})
    charge = claims_charge([claim], POLICY, KEYS, CARDS)  # a multiplier, never a list
    assert (charge.of(MEM), charge.of(R_GPU)) == (32 * 1024, 32)


def test_all_is_charged_every_device_one_node_publishes() -> None:
    whole = claims_charge([_claim({"allocationMode": "All"})], POLICY, KEYS, CARDS)
    assert (whole.of(MEM), whole.of(CORES), whole.of(R_GPU)) == (4 * 24576, 400, 4)
    shares = _claim({"allocationMode": "All", "capacity": {"requests": {"memory": "2Gi"}}})
    assert claims_charge([shares], POLICY, KEYS, CARDS).of(MEM) == 4 * 2048
    # No slice read yet: as many as a node has is unknown, and nothing fits beside it.
    unknown = claims_charge([_claim({"allocationMode": "All"})], POLICY, KEYS, Cards({"nvidia": 1}))
    assert {MEM, CORES, R_GPU} <= unknown.unknown


def test_the_most_devices_of_one_node_are_read_from_the_slices() -> None:
    def published(node: str, devices: int, driver: str = POLICY.webhook.driver_name) -> Any:
        spec = {"driver": driver, "nodeName": node, "pool": {"name": node}}
        return {"spec": {**spec, "devices": [{"name": f"gpu-{i}"} for i in range(devices)]}}

    slices = [published("a", 2), published("a", 3), published("b", 4), published("c", 9, "x")]
    assert most_devices_per_node(slices, POLICY.webhook.driver_name) == 5


def _pod(resources: dict[str, Any], init: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "x", "resources": resources}]}
    if init is not None:
        spec["initContainers"] = init
    return {"metadata": {"name": "p", "uid": "u", "creationTimestamp": "t"}, "spec": spec}


def _charged(pod: dict[str, Any], claims: list[dict[str, Any]] | None = None) -> Charge:
    return plan_pass([pod], claims or [], [], POLICY, KEYS, CARDS).usage


def test_the_implicit_extended_resource_is_charged_whole_cards() -> None:
    pod = _pod({"limits": {f"{IMPLICIT_PREFIX}{CLASS}": "2"}})
    charge = _charged(pod)
    assert (charge.of(MEM), charge.of(CORES), charge.of(R_GPU)) == (2 * 24576, 200, 2)
    # Once kube-scheduler made its claim, the claim is charged, not the resource again.
    pod["status"] = {"extendedResourceClaimStatus": {"resourceClaimName": "made"}}
    claim = _claim({"count": 2}, name="made")
    assert _charged(pod, [claim]).of(MEM) == 2 * 24576
    # Another class's implicit resource charges nothing here.
    assert _charged(_pod({"limits": {f"{IMPLICIT_PREFIX}nic.example.com": "2"}})).amounts == {}


def test_a_sidecar_is_charged_beside_the_app_containers_as_kube_apiserver_charges_it() -> None:
    gpu = {"limits": {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 4000}}
    sidecar = {"name": "side", "image": "x", "restartPolicy": "Always", "resources": gpu}
    plain = {"name": "init", "image": "x", "resources": gpu}
    both = legacy_charge(_pod(gpu, init=[sidecar]), POLICY, KEYS, CARDS)
    assert (both.of(R_MEM), both.of(MEM), both.of(R_GPU)) == (8000, 8000, 2)
    # A plain init container still counts as its peak; one after a sidecar runs beside it.
    assert legacy_charge(_pod(gpu, init=[plain]), POLICY, KEYS, CARDS).of(R_MEM) == 4000
    big = {"limits": {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 9000}}
    after = legacy_charge(
        _pod(gpu, init=[sidecar, {**plain, "resources": big}]), POLICY, KEYS, CARDS
    )
    assert after.of(R_MEM) == 13000  # max(4000 + 4000, 4000 + 9000)


def test_a_count_only_pod_left_to_kube_scheduler_is_charged_its_whole_cards() -> None:
    bridge = policy_from_mapping(
        {"hamiDraWebhook": {"deviceMemorySizes": ["24Gi"], "wholeGpusByExtendedResource": True}}
    ).policy
    keys = quota_keys(bridge)
    pod = _pod({"limits": {"nvidia.com/gpu": 2}})
    charge = legacy_charge(pod, bridge, keys, CARDS)
    assert not charge.unknown
    assert (charge.of(MEM), charge.of(CORES), charge.of(R_GPU)) == (2 * 24576, 200, 2)
    assert legacy_charge(pod, bridge, keys, CARDS, scheduler_claimed=True).amounts == {}
    limits = limits_of([{"metadata": {"name": "q"}, "spec": {"hard": {MEM: "90000"}}}], keys)
    pod["spec"]["schedulingGates"] = [{"name": "hami.io/gpu-quota"}]
    result = plan_pass([pod], [], limits, bridge, keys, CARDS)
    assert [held.name for held in result.release] == ["p"]
