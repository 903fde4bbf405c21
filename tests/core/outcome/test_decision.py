"""The core's decision as a type: what each shape holds, and the plan the shells read."""

from __future__ import annotations

from typing import Any

import pytest

from hami_dra_webhook.core.legacy.request import GpuShare
from hami_dra_webhook.core.outcome.decision import (
    INIT_CLAIMS_HELD,
    Converted,
    Refusal,
    Unchanged,
    describe,
)
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY, policy_from_mapping
from hami_dra_webhook.core.translate.pod import translate_pod


def container(name: str, **limits: str) -> dict[str, Any]:
    keys = {"gpu": "nvidia.com/gpu", "mem": "nvidia.com/gpumem", "cores": "nvidia.com/gpucores"}
    return {"name": name, "resources": {"limits": {keys[k]: v for k, v in limits.items()}}}


def test_converted_holds_the_plan_of_every_gpu_container() -> None:
    pod = {
        "spec": {
            "initContainers": [container("load", gpu="1", mem="1000")],
            "containers": [
                container("serve", gpu="2", cores="40"),
                container("none", gpu="0"),
                {"name": "cpu"},
            ],
        }
    }
    decision = translate_pod(pod, DEFAULT_POLICY, "ml")
    assert isinstance(decision, Converted)
    assert [(p.ref.list_name, p.ref.position, p.ref.name) for p in decision.plan] == [
        ("initContainers", 0, "load"),
        ("containers", 0, "serve"),
        ("containers", 1, "none"),
    ]
    load, serve, none = decision.plan
    assert load.share == GpuShare(count=1, memory_mib=1000, percentage=None, cores=0)
    assert serve.share == GpuShare(count=2, memory_mib=None, percentage=None, cores=40)
    assert none.share is None and none.template is None and none.claim is None
    assert [load.template, serve.template] == [t["metadata"]["name"] for t in decision.templates]
    claims = decision.apply(pod)["spec"]["resourceClaims"]
    assert claims == [
        {"name": load.claim, "resourceClaimTemplateName": load.template},
        {"name": serve.claim, "resourceClaimTemplateName": serve.template},
    ]
    assert decision.init_claims_held and INIT_CLAIMS_HELD in decision.warnings
    assert decision.resources == ["nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores"]


@pytest.mark.parametrize(
    ("limits", "shares"),
    [
        ({"gpu": "1"}, False),  # a whole device: all memory, cores 100
        ({"gpu": "2", "cores": "100"}, False),
        ({"gpu": "1", "mem": "100"}, True),
        ({"gpu": "1", "cores": "99"}, True),
        ({"gpu": "1", "cores": "0"}, True),
        ({"gpu": "0"}, False),  # no device at all
    ],
)
def test_shares_a_gpu_is_less_than_a_whole_device(limits: dict[str, str], shares: bool) -> None:
    decision = translate_pod({"spec": {"containers": [container("c", **limits)]}}, DEFAULT_POLICY)
    assert isinstance(decision, Converted)
    assert decision.shares_a_gpu is shares
    assert [p.shares_a_gpu for p in decision.plan] == [shares]


def test_a_refusal_keeps_what_was_understood_before_it() -> None:
    policy = policy_from_mapping({"hamiDraWebhook": {"deviceMemorySizes": []}}).policy
    pod = {
        "spec": {
            "containers": [
                container("a", gpu="1", mem="1000"),
                {"name": "b", "resources": {"limits": {"nvidia.com/gpumem-percentage": "50"}}},
            ]
        }
    }
    decision = translate_pod(pod, policy, "ml")
    assert isinstance(decision, Refusal)
    assert decision.code == 422 and decision.reason == "no-memory-sizes"
    assert [p.ref.name for p in decision.plan] == ["a", "b"]
    assert decision.plan[1].share is not None and decision.plan[1].share.percentage == 50
    bad = translate_pod({"spec": {"containers": [container("x", gpu="x")]}}, policy)
    assert isinstance(bad, Refusal) and bad.plan == ()


def test_unchanged_says_why_only_when_legacy_keys_stay() -> None:
    gpu = container("c", gpu="1")
    opted_out = {
        "metadata": {"labels": {"hami.io/webhook": "ignore"}},
        "spec": {"containers": [gpu]},
    }
    decision = translate_pod(opted_out, DEFAULT_POLICY)
    assert isinstance(decision, Unchanged)
    assert decision.left_alone is not None and decision.left_alone.startswith("left unchanged")
    assert decision.warnings == [decision.left_alone]
    cpu = translate_pod({"spec": {"containers": [{"name": "c"}]}}, DEFAULT_POLICY)
    assert cpu == Unchanged(warnings=[])


def test_the_three_shapes_have_their_outcome_tags() -> None:
    assert (Converted.outcome, Unchanged.outcome, Refusal.outcome) == (
        "converted",
        "unchanged",
        "refused",
    )
    refusal = Refusal(code=422, message="m", warnings=[], reason="r")
    assert not hasattr(refusal, "patch") and not hasattr(Unchanged(warnings=[]), "code")


@pytest.mark.parametrize(
    ("share", "words"),
    [
        (GpuShare(1, 8000, None, 30), "1 GPU, 8000 MiB, 30% of SMs"),
        (GpuShare(2, None, None, 100), "2 different GPUs, the whole memory, all SMs"),
        (GpuShare(1, None, 25, 0), "1 GPU, 25% of each card's memory, no SM limit"),
    ],
)
def test_a_share_in_words(share: GpuShare, words: str) -> None:
    assert describe(share) == words


def test_the_plan_holds_each_containers_request() -> None:
    pod = {"spec": {"containers": [container("a", gpu="1", mem="1000", cores="30")]}}
    decision = translate_pod(pod, DEFAULT_POLICY)
    assert isinstance(decision, Converted)
    [planned] = decision.plan
    assert (planned.request.count, planned.request.memory, planned.request.cores) == (1, 1000, 30)
    assert planned.request.in_limits == (
        "nvidia.com/gpu",
        "nvidia.com/gpumem",
        "nvidia.com/gpucores",
    )
    policy = policy_from_mapping({"hamiDraWebhook": {"deviceMemorySizes": []}}).policy
    percentage = {"resources": {"limits": {"nvidia.com/gpumem-percentage": "50"}}, "name": "b"}
    refused = translate_pod({"spec": {"containers": [percentage]}}, policy)
    assert isinstance(refused, Refusal)
    assert refused.plan[0].request.percentage == 50


def test_overwrite_env_alone_converts_with_an_empty_plan() -> None:
    policy = policy_from_mapping({"nvidia": {"overwriteEnv": True}}).policy
    decision = translate_pod({"spec": {"containers": [{"name": "cpu"}]}}, policy)
    assert isinstance(decision, Converted) and decision.patch
    assert decision.plan == () and decision.resources == [] and decision.templates == []
    assert decision.shares_a_gpu is False and decision.init_claims_held is False


def test_a_plan_wants_one_thing_and_its_claim_holds_the_ask() -> None:
    """`wants` is NVIDIA's share, another family's ask or nothing, never two; the ask a claim
    holds comes with its template and claim name, all three or none."""
    policy = policy_from_mapping({"hamiDraWebhook": {"vendors": {"amd": {"convert": True}}}}).policy
    pod = {
        "spec": {
            "containers": [
                container("share", gpu="1", mem="1000"),
                {"name": "amd", "resources": {"limits": {"amd.com/gpu": "1"}}},
                container("none", gpu="0"),
            ]
        }
    }
    decision = translate_pod(pod, policy, "ml")
    assert isinstance(decision, Converted), decision
    share, amd, none = decision.plan
    assert isinstance(share.wants, GpuShare) and share.share is share.wants
    assert share.claimed is not None and share.ask is share.claimed.ask
    assert (share.template, share.claim) == (share.claimed.template, share.claimed.claim)
    assert amd.share is None and amd.ask is not None and amd.ask.family == "amd"
    assert amd.claimed is not None and amd.template and amd.claim
    assert none.wants is None and none.claimed is None
    assert (none.share, none.ask, none.template, none.claim) == (None, None, None, None)
    assert not none.gets_devices and none.summary == "no device"
