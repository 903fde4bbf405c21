"""The quota keys and charges, case by case against HAMi v2.10's and kube-apiserver's counting
rules (REFERENCE.md §1a; docs/quotas.md), and the release pass of one namespace."""

from __future__ import annotations

from typing import Any

import pytest

from hami_dra_webhook.core.quota.claim_charge import claims_charge
from hami_dra_webhook.core.quota.gpu_quota import (
    GATE,
    Charge,
    exceeded,
    legacy_charge,
    limits_of,
    quota_keys,
)
from hami_dra_webhook.core.quota.quota_groups import Cards
from hami_dra_webhook.core.quota.quota_plan import WAITING_FOR_CLAIMS, plan_pass
from hami_dra_webhook.core.settings.policy import Policy, policy_from_mapping

POLICY = policy_from_mapping({"hamiDraWebhook": {"deviceMemorySizes": ["80Gi", "40Gi"]}}).policy
KEYS = quota_keys(POLICY)
MEM, CORES = "limits.nvidia.com/gpumem", "limits.nvidia.com/gpucores"
R_MEM, R_GPU, R_CORES = (
    "requests.nvidia.com/gpumem",
    "requests.nvidia.com/gpu",
    "requests.nvidia.com/gpucores",
)
CARDS = Cards({"nvidia": 81920})


def _pod(
    *containers: dict[str, Any], init: list[dict[str, Any]] | None = None, **spec: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "containers": [
            {"name": f"c{i}", "image": "x", "resources": {"limits": c}}
            for i, c in enumerate(containers)
        ],
        **spec,
    }
    if init:
        body["initContainers"] = [
            {"name": f"i{i}", "image": "x", "resources": {"limits": c}} for i, c in enumerate(init)
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": body}


def test_the_keys_kept_are_hamis_limits_and_kube_apiservers_requests() -> None:
    assert set(KEYS) == {MEM, CORES, R_MEM, R_CORES, R_GPU}
    # limits.nvidia.com/gpu is enforced by nobody in legacy: not kept here either.
    assert "limits.nvidia.com/gpu" not in KEYS


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        # per device times devices (countPodDevices: Memreq * Nums)
        (
            {"nvidia.com/gpu": 2, "nvidia.com/gpumem": 3000},
            {MEM: 6000, R_MEM: 3000, R_GPU: 2, CORES: 0},
        ),
        # gpucores per device, times devices; kube's requests key once
        (
            {"nvidia.com/gpu": 2, "nvidia.com/gpumem": 1000, "nvidia.com/gpucores": 30},
            {MEM: 2000, CORES: 60, R_CORES: 30},
        ),
        # a bare count: exclusive (cores 100), memory the whole card (the largest known)
        ({"nvidia.com/gpu": 1}, {MEM: 81920, CORES: 100, R_MEM: 0, R_GPU: 1}),
        # a percentage: of the card chosen later; charged on the largest card before allocation
        (
            {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 50},
            {MEM: 40960, CORES: 0, R_MEM: 0},
        ),
        # the count defaulted from defaultGPUNum (1): HAMi counts the device, kube counts no gpu
        ({"nvidia.com/gpumem": 2000}, {MEM: 2000, R_GPU: 0, R_MEM: 2000}),
        # cores above 100 are clamped per device by HAMi; kube counts the value asked
        (
            {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000, "nvidia.com/gpucores": 100},
            {CORES: 100, R_CORES: 100},
        ),
    ],
)
def test_a_legacy_container_is_charged_as_hami_and_kube_apiserver_count_it(
    limits: dict[str, int], expected: dict[str, int]
) -> None:
    charge = legacy_charge(_pod(limits), POLICY, KEYS, CARDS)
    assert {k: charge.of(k) for k in expected} == expected
    assert not charge.unknown


def test_default_memory_and_cores_are_charged() -> None:
    policy = policy_from_mapping({"nvidia": {"defaultMemory": 4000, "defaultCores": 20}}).policy
    charge = legacy_charge(
        _pod({"nvidia.com/gpu": 2, "nvidia.com/gpucores": 10}), policy, KEYS, CARDS
    )
    assert charge.of(MEM) == 8000 and charge.of(CORES) == 20
    # defaultMemory is not a request: kube-apiserver counted none
    assert charge.of(R_MEM) == 0


def test_several_containers_add_up_and_init_containers_count_as_their_peak() -> None:
    app = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000}
    pod = _pod(app, app, init=[{"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000}])
    charge = legacy_charge(pod, POLICY, KEYS, CARDS)
    assert charge.of(MEM) == 3000  # max(1000 + 1000, 3000)
    assert charge.of(R_MEM) == 3000 and charge.of(R_GPU) == 2
    small = _pod(app, app, init=[{"nvidia.com/gpu": 1, "nvidia.com/gpumem": 500}])
    assert legacy_charge(small, POLICY, KEYS, CARDS).of(MEM) == 2000


def test_a_whole_card_with_no_card_size_known_is_unknown_and_never_fits() -> None:
    charge = legacy_charge(_pod({"nvidia.com/gpu": 1}), Policy(), KEYS, Cards())
    assert MEM in charge.unknown
    limits = limits_of([_quota("q", {MEM: "100000"})], KEYS)
    found = exceeded(limits, Charge(), charge)
    assert found is not None and "no card size is known" in found[1]


def _quota(name: str, hard: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"hard": hard}}


def test_quota_values_are_read_as_hami_reads_them() -> None:
    limits = limits_of([_quota("a", {MEM: "8k", "pods": "10"}), _quota("b", {MEM: "8Gi"})], KEYS)
    assert [(limit.quota, limit.hard) for limit in limits] == [("a", 8000), ("b", 8589934592)]
    factor = policy_from_mapping({"nvidia": {"memoryFactor": 4}}).policy
    assert (
        limits_of([_quota("a", {MEM: "2000", R_MEM: "2000"})], quota_keys(factor))[0].hard == 8000
    )


def test_the_refusal_is_in_kube_apiservers_words() -> None:
    limits = limits_of([_quota("gpu", {MEM: "8000"})], KEYS)
    found = exceeded(limits, Charge({MEM: 7500}), Charge({MEM: 1000}))
    assert found is not None
    assert found[1] == (
        "exceeded quota: gpu, requested: limits.nvidia.com/gpumem=1000,"
        " used: limits.nvidia.com/gpumem=7500, limited: limits.nvidia.com/gpumem=8000"
    )
    assert exceeded(limits, Charge({MEM: 7000}), Charge({MEM: 1000})) is None
    # a quota lowered below what runs: a pod asking nothing of the key still fits
    assert exceeded(limits, Charge({MEM: 9000}), Charge({CORES: 10})) is None


def _claim(
    name: str,
    count: int = 1,
    memory: str | None = "1000Mi",
    cores: str | None = "30",
    allocated: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    capacity = {k: v for k, v in (("memory", memory), ("cores", cores)) if v is not None}
    exact: dict[str, Any] = {
        "deviceClassName": POLICY.webhook.device_class_name,
        "allocationMode": "ExactCount",
        "count": count,
    }
    if capacity:
        exact["capacity"] = {"requests": capacity}
    claim: dict[str, Any] = {
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exact}]}},
    }
    if allocated is not None:
        claim["status"] = {"allocation": {"devices": {"results": allocated}}}
    return claim


def test_a_claim_is_charged_what_it_asks_and_once_allocated_what_it_holds() -> None:
    charge = claims_charge([_claim("a", count=2)], POLICY, KEYS, CARDS)
    assert (charge.of(MEM), charge.of(CORES), charge.of(R_MEM), charge.of(R_GPU)) == (
        2000,
        60,
        1000,
        2,
    )
    whole = claims_charge([_claim("w", memory=None, cores=None)], POLICY, KEYS, CARDS)
    assert (whole.of(MEM), whole.of(CORES)) == (81920, 100)
    held = _claim(
        "w",
        memory=None,
        cores=None,
        allocated=[
            {
                "request": "gpu",
                "driver": POLICY.webhook.driver_name,
                "pool": "n",
                "device": "gpu-0",
                "consumedCapacity": {"memory": "40Gi", "cores": "100"},
            }
        ],
    )
    assert claims_charge([held], POLICY, KEYS, CARDS).of(MEM) == 40960
    other = _claim("o")
    other["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "nic.example.com"
    assert claims_charge([other], POLICY, KEYS, CARDS).amounts == {}


def test_first_available_is_charged_its_largest_alternative() -> None:
    claim = _claim("p")
    exact = claim["spec"]["devices"]["requests"][0].pop("exactly")
    small, large = dict(exact), dict(exact)
    small["capacity"] = {"requests": {"memory": "20Gi", "cores": "0"}}
    large["capacity"] = {"requests": {"memory": "40Gi", "cores": "0"}}
    claim["spec"]["devices"]["requests"][0]["firstAvailable"] = [
        {"name": "a", **small},
        {"name": "b", **large},
    ]
    assert claims_charge([claim], POLICY, KEYS, CARDS).of(MEM) == 40960


def _converted(
    name: str, created: str, claim: str | None, gated: bool = True, phase: str = "Pending"
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "hami-gpu-x"}],
    }
    if gated:
        spec["schedulingGates"] = [{"name": "other"}, {"name": GATE}]
    status: dict[str, Any] = {"phase": phase}
    if claim:
        status["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": claim}]
    return {
        "metadata": {
            "name": name,
            "uid": f"u-{name}",
            "creationTimestamp": created,
            "resourceVersion": "1",
        },
        "spec": spec,
        "status": status,
    }


def test_held_pods_go_oldest_first_while_they_fit() -> None:
    limits = limits_of([_quota("gpu", {MEM: "3000"})], KEYS)
    pods = [_converted("run", "t0", "c-run", gated=False)]
    pods += [_converted(f"p{i}", f"t{i}", f"c-p{i}") for i in (3, 1, 2)]
    pods.append(_converted("done", "t0", "c-done", gated=False, phase="Succeeded"))
    pods.append(_converted("new", "t9", None))
    claims = [_claim(f"c-{n}") for n in ("run", "p1", "p2", "p3", "done")]
    result = plan_pass(pods, claims, limits, POLICY, KEYS, CARDS)
    assert [h.name for h in result.release] == ["p1", "p2"]
    assert [h.gate_index for h in result.release] == [1, 1]
    assert result.usage.of(MEM) == 3000
    reasons = {h.name: h.reason for h in result.held}
    assert reasons["p3"].startswith(
        "exceeded quota: gpu, requested: limits.nvidia.com/gpumem=1000, used: limits.nvidia.com/gpumem=3000"
    )
    assert reasons["new"] == WAITING_FOR_CLAIMS


def test_a_claim_two_pods_share_is_charged_once_and_no_limit_releases_all() -> None:
    limits = limits_of([_quota("gpu", {MEM: "1000"})], KEYS)
    pods = [_converted("a", "t0", "shared", gated=False), _converted("b", "t1", "shared")]
    result = plan_pass(pods, [_claim("shared")], limits, POLICY, KEYS, CARDS)
    assert [h.name for h in result.release] == ["b"]
    result = plan_pass(
        [_converted("c", "t0", "x")], [_claim("x", memory="90000Mi")], [], POLICY, KEYS, CARDS
    )
    assert [h.name for h in result.release] == ["c"]


def test_legacy_and_converted_pods_share_one_usage() -> None:
    limits = limits_of([_quota("gpu", {MEM: "2000"})], KEYS)
    legacy = _pod({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1500})
    legacy["metadata"] |= {"uid": "l", "creationTimestamp": "t0"}
    result = plan_pass(
        [legacy, _converted("c", "t1", "x")], [_claim("x")], limits, POLICY, KEYS, CARDS
    )
    assert result.usage.of(MEM) == 1500 and [h.name for h in result.held] == ["c"]


def test_scan_says_which_keys_are_kept_and_which_stop_limiting() -> None:
    from hami_dra_webhook.core.settings.policy import policy_from_yaml
    from hami_dra_webhook.migrate.quotas import quota_report

    def document(hard: dict[str, str]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ResourceQuota", **_quota("q", hard)}

    kept = quota_report(document({MEM: "8000", R_GPU: "2"}), POLICY, "", "ns")
    assert kept is not None and "the webhook keeps" in kept.stops
    assert "stops limiting" not in kept.stops
    neuron = policy_from_yaml("hamiDraWebhook: {vendors: {awsNeuron: {convert: true}}}").policy
    core = "limits.aws.amazon.com/neuroncore"
    mixed = quota_report(document({MEM: "8000", core: "4"}), neuron, "", "ns")
    assert mixed is not None
    assert f"converted pods request none of {core}, so it stops limiting" in mixed.stops
    assert "the webhook keeps limits.nvidia.com/gpumem" in mixed.stops
