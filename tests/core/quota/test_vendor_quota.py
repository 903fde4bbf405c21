"""The quota keys of the other converted families, case by case against HAMi v2.10's counting
(`pkg/device/{hygon,ascend,amd,awsneuron}/device.go`, `pkg/device/quota.go`; docs/quotas.md
"Other vendors"), and the same charge for a legacy pod and for the claims its conversion makes."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from hami_dra_webhook.core.legacy.request import LegacyRequest
from hami_dra_webhook.core.model.types import ContainerRef
from hami_dra_webhook.core.outcome.ask import Alternative, DeviceAsk
from hami_dra_webhook.core.outcome.decision import ContainerPlan, Converted
from hami_dra_webhook.core.quota import quota_groups
from hami_dra_webhook.core.quota.claim_charge import claims_charge
from hami_dra_webhook.core.quota.gpu_quota import legacy_charge, quota_keys
from hami_dra_webhook.core.quota.quota_groups import cards_for, percent_of_units
from hami_dra_webhook.core.settings.policy import Policy, policy_from_yaml
from hami_dra_webhook.core.translate.pod import translate_pod
from hami_dra_webhook.core.vendors import families
from hami_dra_webhook.core.vendors.profile import ProfileDefaults
from hami_dra_webhook.core.vendors.quota_group import DeviceHold, QuotaGroup
from tests.support.policies import every_vendor

POLICY = policy_from_yaml(
    every_vendor(hygon="computeUnits: [120]", webhook="deviceMemorySizes: [80Gi]")
).policy
TWO_MODELS = policy_from_yaml(
    "hamiDraWebhook: {vendors: {hygon: {convert: true, computeUnits: [120, 64]}}}"
).policy
KEYS = quota_keys(POLICY)
# Hygon cards of 64 GiB, AMD cards of 192 GiB, as their drivers' ResourceSlices would say.
CARDS = cards_for(POLICY, {"hygon": 65536, "amd": 196608})
H_MEM, H_CORES = "limits.hygon.com/dcumem", "limits.hygon.com/dcucores"
B3_MEM, B3_CORES = "limits.huawei.com/Ascend910B3-memory", "limits.huawei.com/Ascend910B3-core"
P_MEM = "limits.huawei.com/Ascend310P-memory"


def _pod(limits: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "annotations": annotations or {}},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}]},
    }


HAMI_CORE = {"huawei.com/vnpu-mode": "hami-core"}


def test_every_converted_familys_keys_are_kept_but_neuroncore() -> None:
    for key in (
        H_MEM,
        H_CORES,
        "limits.hygon.com/hcumem",
        "limits.hygon.com/hcucores",
        "requests.hygon.com/dcunum",
        "requests.hygon.com/dcumem",
        B3_MEM,
        B3_CORES,
        "requests.huawei.com/Ascend910B3",
        "limits.huawei.com/Ascend310P-memory",
        "limits.amd.com/gpumem",
        "limits.amd.com/gpucores",
        "requests.amd.com/gpu",
        "requests.aws.amazon.com/neuron",
    ):
        assert key in KEYS, key
    # HAMi charges neuroncore by the node's instance type, unknown before a node is chosen.
    assert "limits.aws.amazon.com/neuroncore" not in KEYS
    # A family that is not converted keeps nothing (its pods stay on legacy HAMi).
    assert H_MEM not in quota_keys(policy_from_yaml("{}").policy)


@pytest.mark.parametrize(
    ("limits", "annotations", "expected"),
    [
        # Hygon: memory x devices; cores percent x devices; absent cores = 100
        (
            {"hygon.com/dcunum": 2, "hygon.com/dcumem": 4000, "hygon.com/dcucores": 30},
            None,
            {H_MEM: 8000, H_CORES: 60, "requests.hygon.com/dcumem": 4000},
        ),
        ({"hygon.com/dcunum": 1, "hygon.com/dcumem": 4000}, None, {H_MEM: 4000, H_CORES: 100}),
        # count only: the whole card's memory (the largest Hygon card before allocation)
        ({"hygon.com/dcunum": 1}, None, {H_MEM: 65536, H_CORES: 100}),
        # cores above 100 clamped, as HAMi's Fit does
        ({"hygon.com/dcunum": 1, "hygon.com/dcucores": 150}, None, {H_CORES: 100}),
        # the post-v2.10 spelling names the same cards: both spellings' keys charge them
        (
            {"hygon.com/hcunum": 1, "hygon.com/hcumem": 2000},
            None,
            {"limits.hygon.com/hcumem": 2000, H_MEM: 2000},
        ),
        # Ascend hami-core: memory as asked, cores as asked (absent: 0), per chip
        (
            {"huawei.com/Ascend910B3": 1, "huawei.com/Ascend910B3-memory": 3000},
            HAMI_CORE,
            {B3_MEM: 3000, B3_CORES: 0, P_MEM: 0},
        ),
        (
            {
                "huawei.com/Ascend910B3": 2,
                "huawei.com/Ascend910B3-memory": 3000,
                "huawei.com/Ascend910B3-core": 40,
            },
            HAMI_CORE,
            {B3_MEM: 6000, B3_CORES: 80, "requests.huawei.com/Ascend910B3-memory": 3000},
        ),
        # Ascend templates: the template legacy rounds to; no memory: memoryAllocatable
        (
            {"huawei.com/Ascend910B3": 1, "huawei.com/Ascend910B3-memory": 9000},
            None,
            {B3_MEM: 16384},
        ),
        ({"huawei.com/Ascend310P": 1}, None, {P_MEM: 21527}),
        # AMD: whole cards (the card's memory, 100 cores each)
        (
            {"amd.com/gpu": 2},
            None,
            {"limits.amd.com/gpumem": 2 * 196608, "limits.amd.com/gpucores": 200},
        ),
        ({"aws.amazon.com/neuron": 3}, None, {"requests.aws.amazon.com/neuron": 3}),
    ],
)
def test_a_legacy_pod_is_charged_as_hami_counts_it(
    limits: dict[str, Any], annotations: dict[str, str] | None, expected: dict[str, int]
) -> None:
    charge = legacy_charge(_pod(limits, annotations), POLICY, KEYS, CARDS)
    assert not charge.unknown
    assert {key: charge.of(key) for key in expected} == expected


def test_init_containers_collapse_as_hami_collapses_them() -> None:
    pod = _pod({"hygon.com/dcunum": 1, "hygon.com/dcumem": 1000})
    pod["spec"]["initContainers"] = [
        {
            "name": "i",
            "image": "x",
            "resources": {"limits": {"hygon.com/dcunum": 1, "hygon.com/dcumem": 3000}},
        }
    ]
    assert legacy_charge(pod, POLICY, KEYS, CARDS).of(H_MEM) == 3000


def test_a_whole_card_of_unknown_size_is_unknown() -> None:
    unknown = cards_for(POLICY)  # no Hygon ResourceSlice read
    charge = legacy_charge(_pod({"hygon.com/dcunum": 1}), POLICY, KEYS, unknown)
    assert H_MEM in charge.unknown and H_CORES not in charge.unknown


def _claims_of(pod: dict[str, Any], policy: Any, allocate: bool) -> list[dict[str, Any]]:
    """The claims kube-controller-manager makes from the pod's templates; `allocate`: with
    the allocation kube-scheduler writes (each request on its first way, consuming what it
    asks)."""
    decision = translate_pod(pod, policy)
    assert isinstance(decision, Converted), decision
    claims = []
    for template in decision.templates:
        claim = {"metadata": {"name": template["metadata"]["name"]}}
        claim["spec"] = copy.deepcopy(template["spec"]["spec"])
        if allocate:
            results = []
            for request in claim["spec"]["devices"]["requests"]:
                way = request.get("exactly") or request["firstAvailable"][0]
                name = request["name"] + (f"/{way['name']}" if "name" in way else "")
                consumed = (way.get("capacity") or {}).get("requests")
                for i in range(way.get("count", 1)):
                    result = {"request": name, "driver": _driver(way, policy), "device": f"d{i}"}
                    if consumed:
                        result["consumedCapacity"] = consumed
                    results.append(result)
            claim["status"] = {"allocation": {"devices": {"results": results}}}
        claims.append(claim)
    return claims


def _driver(way: dict[str, Any], policy: Any) -> str:
    from hami_dra_webhook.core.quota.quota_groups import groups

    return next(g.driver for g in groups(policy) if g.device_class == way["deviceClassName"])


CONVERTED = [
    ({"hygon.com/dcunum": 2, "hygon.com/dcumem": 4000, "hygon.com/dcucores": 30}, None),
    ({"hygon.com/dcunum": 1, "hygon.com/dcucores": 33}, None),
    ({"hygon.com/dcunum": 1, "hygon.com/dcucores": 0}, None),
    ({"hygon.com/dcunum": 1}, None),
    ({"huawei.com/Ascend910B3": 2, "huawei.com/Ascend910B3-memory": 3000}, HAMI_CORE),
    (
        {
            "huawei.com/Ascend310P": 1,
            "huawei.com/Ascend310P-memory": 2000,
            "huawei.com/Ascend310P-core": 25,
        },
        HAMI_CORE,
    ),
    ({"huawei.com/Ascend910B3": 1, "huawei.com/Ascend910B3-memory": 9000}, None),
    ({"huawei.com/Ascend910B3": 1}, None),
    ({"amd.com/gpu": 2}, None),
    ({"aws.amazon.com/neuron": 2}, None),
]


@pytest.mark.parametrize("allocate", [False, True], ids=["asked", "allocated"])
@pytest.mark.parametrize(("limits", "annotations"), CONVERTED)
def test_the_claims_of_a_converted_pod_are_charged_what_the_legacy_pod_was(
    limits: dict[str, Any], annotations: dict[str, str] | None, allocate: bool
) -> None:
    pod = _pod(limits, annotations)
    legacy = legacy_charge(pod, POLICY, KEYS, CARDS)
    converted = claims_charge(_claims_of(pod, POLICY, allocate), POLICY, KEYS, CARDS)
    hami = [key for key, rule in KEYS.items() if rule.form == "hami" or rule.dimension == "count"]
    assert {k: converted.of(k) for k in hami} == {k: legacy.of(k) for k in hami}
    assert not converted.unknown


def test_hygon_cores_on_two_card_models_are_charged_the_percent_asked() -> None:
    """Two models: one firstAvailable way per model, each pinned to its compute units; the
    percent is the one asked whichever the scheduler takes (on a card of 64 CU, 25% is 16 CU
    exactly), and before it takes one."""
    keys, cards = quota_keys(TWO_MODELS), cards_for(TWO_MODELS, {"hygon": 65536})
    pod = _pod({"hygon.com/dcunum": 1, "hygon.com/dcucores": 25})
    claim = _claims_of(pod, TWO_MODELS, allocate=False)[0]
    assert claims_charge([claim], TWO_MODELS, keys, cards).of(H_CORES) == 25
    ways = claim["spec"]["devices"]["requests"][0]["firstAvailable"]
    for way in ways:  # allocated on either model
        held = copy.deepcopy(claim)
        result = {
            "request": f"hcu/{way['name']}",
            "driver": "dra.hygon.com",
            "device": "d",
            "consumedCapacity": way["capacity"]["requests"],
        }
        held["status"] = {"allocation": {"devices": {"results": [result]}}}
        assert claims_charge([held], TWO_MODELS, keys, cards).of(H_CORES) == 25, way["name"]


def test_percent_of_units_is_the_percent_asked_and_never_less() -> None:
    for card in (120, 128, 100, 255, 64, 60, 1):
        for percent in range(0, 101):
            units = -(-percent * card // 100)
            charged = percent_of_units(units, card)
            assert charged == percent if card >= 100 else charged >= percent, (card, percent)
    assert percent_of_units(20, 60) == 33  # 60 CU: 32% and 33% both ask 20 CU
    assert percent_of_units(1, 128) == 1  # a unit is at least a percent
    assert percent_of_units(5, 0) == 100  # card not known: charged as a whole card's


def _tenant_claim(exact: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "t"},
        "spec": {"devices": {"requests": [{"name": "x", "exactly": exact}]}},
    }


def test_a_tenants_claim_is_never_charged_less_than_it_can_take() -> None:
    """Claims a tenant writes are hostile input: a Hygon share not pinned to a card model is
    a whole card's cores; an Ascend claim not pinned to a chip (or pinned inside a negation)
    is charged to every chip's keys."""
    hygon = _tenant_claim(
        {
            "deviceClassName": "dra.hygon.com",
            "count": 1,
            "capacity": {"requests": {"cores": "10"}},
            "selectors": [
                {
                    "cel": {
                        "expression": 'device.capacity["dra.hygon.com"].cores.compareTo('
                        'quantity("1000")) == 0 || true'
                    }
                }
            ],
        }
    )
    assert claims_charge([hygon], POLICY, KEYS, CARDS).of(H_CORES) == 100
    unpinned = _tenant_claim(
        {
            "deviceClassName": "hami-vnpu-core.project-hami.io",
            "count": 1,
            "capacity": {"requests": {"memory": "1000Mi", "cores": "10"}},
            "selectors": [
                {
                    "cel": {
                        "expression": '!(device.attributes["ascend.project-hami.io"]'
                        '.productName == "910B3")'
                    }
                }
            ],
        }
    )
    charge = claims_charge([unpinned], POLICY, KEYS, CARDS)
    assert charge.of(B3_MEM) == 1000 and charge.of(P_MEM) == 1000


class _Plain(ProfileDefaults):
    """A family added to the registry with its profile alone: its quota group and its hold."""

    key = "plain"

    def quota_groups(self, policy: Policy) -> tuple[QuotaGroup, ...]:
        group = QuotaGroup("plain", ("plain.io/n",), ("plain.io/mem",), ("plain.io/cores",))
        return (group,)

    def held(self, group: QuotaGroup, plan: ContainerPlan) -> DeviceHold:
        return DeviceHold(3, plan.request.memory, None, 150)


def test_a_familys_quota_is_its_profiles_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The quota core names no family: a profile added to the registry brings its keys and
    its containers' charge (cores clamped to 100, as HAMi clamps them)."""
    plain = _Plain()
    where = "hami_dra_webhook.core.quota.quota_groups"
    monkeypatch.setattr(f"{where}.PROFILES", (*families.PROFILES, plain))
    monkeypatch.setattr(f"{where}.BY_KEY", {**families.BY_KEY, "plain": plain})
    policy = policy_from_yaml("hamiDraWebhook: {}").policy
    keys = quota_keys(policy)
    assert {k: (r.dimension, r.form) for k, r in keys.items() if "plain" in k} == {
        "limits.plain.io/mem": ("memory", "hami"),
        "requests.plain.io/mem": ("memory", "native"),
        "limits.plain.io/cores": ("cores", "hami"),
        "requests.plain.io/cores": ("cores", "native"),
        "requests.plain.io/n": ("count", "native"),
    }
    request = LegacyRequest(1, 500, None, None, None, ("plain.io/n", "plain.io/mem"), ())
    wanted = DeviceAsk("plain", "plain.io", "dev", 3, (Alternative(()),), None, "3", False)
    plan = ContainerPlan(ContainerRef("containers", 0, "c"), request, wanted, "plain")
    use = quota_groups.container_use(plan, policy)
    assert use is not None
    assert (use.group, use.devices, use.memory_mib, use.cores) == ("plain", 3, 500, 100)
    assert use.asked == {"count": 1, "memory": 500, "cores": 0}
