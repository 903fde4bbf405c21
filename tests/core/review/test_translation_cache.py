"""The pod view is exactly what the translation reads, so it is an exact cache key; the cache
answers repeated pods without translating and stays within its bounds."""

from __future__ import annotations

import copy
import datetime
from typing import Any

from hypothesis import HealthCheck, given, settings

from hami_dra_webhook.core.outcome.decision import Converted
from hami_dra_webhook.core.review.translation_cache import TranslationCache
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY, Policy, policy_from_mapping
from hami_dra_webhook.core.translate.pod import translate_pod
from hami_dra_webhook.core.translate.pod_view import pod_view
from tests.support.strategies import odd_pods, pods, policies

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(pod=pods(), policy=policies())
def test_the_view_decides_exactly_as_the_pod(pod: dict[str, Any], policy: Policy) -> None:
    assert translate_pod(pod_view(pod), policy, "team-a") == translate_pod(pod, policy, "team-a")


@SETTINGS
@given(pod=odd_pods())
def test_the_view_decides_exactly_as_the_pod_of_any_shape(pod: Any) -> None:
    original = copy.deepcopy(pod)
    assert translate_pod(pod_view(pod), DEFAULT_POLICY, "ns") == translate_pod(
        pod, DEFAULT_POLICY, "ns"
    )
    assert pod == original, "the view does not change the pod"


@SETTINGS
@given(pod=pods(), policy=policies())
def test_a_cached_decision_is_the_pods_own(pod: dict[str, Any], policy: Policy) -> None:
    """Whatever entry a pod hits, the decision is the one its own translation gives."""
    cache = TranslationCache()
    first = cache.decide(pod, policy, "team-a")
    twin = copy.deepcopy(pod)
    if "metadata" in twin:  # (a pod without metadata gets it added: that is read)
        twin["metadata"]["generateName"] = "other-"
    for container in twin["spec"]["containers"]:
        container["image"] = "elsewhere"  # not read by the translation
    second = cache.decide(twin, policy, "team-a")
    assert second is first and cache.hits == 1
    assert second == translate_pod(twin, policy, "team-a")


def cache_pod(**limits: str) -> dict[str, Any]:
    resources = {"limits": {"nvidia.com/gpu": "1", **limits}}
    return {
        "metadata": {"generateName": "rs-", "labels": {"app": "a"}, "annotations": {"x": "1"}},
        "spec": {"containers": [{"name": "c", "image": "i", "resources": resources}]},
    }


def test_every_field_the_translation_reads_is_in_the_key() -> None:
    """Two pods that differ in any field the translation reads never share an entry."""
    base = cache_pod(**{"nvidia.com/gpumem": "1000"})
    variants = []
    for change in (
        lambda p: p["spec"]["containers"][0]["resources"]["limits"].update(
            {"nvidia.com/gpumem": "2000"}
        ),
        lambda p: p["spec"]["containers"][0].update(name="d"),
        lambda p: p["spec"]["containers"][0].update(env=[{"name": "A", "value": "1"}]),
        lambda p: p["spec"]["containers"][0].update(securityContext={"privileged": True}),
        lambda p: p["spec"].update(nodeName="n1"),
        lambda p: p["spec"].update(schedulerName="hami-scheduler"),
        lambda p: p["spec"].update(runtimeClassName="nvidia"),
        lambda p: p["spec"].update(resourceClaims=[{"name": "x", "resourceClaimName": "y"}]),
        lambda p: p["spec"].update(initContainers=[{"name": "i"}]),
        lambda p: p["metadata"]["labels"].update({"hami.io/webhook": "ignore"}),
        lambda p: p["metadata"]["labels"].update({"hami.io/dra": "true"}),
        lambda p: p["metadata"].update(labels=None),
        lambda p: p["metadata"].pop("labels"),
        lambda p: p["metadata"]["annotations"].update({"nvidia.com/use-gputype": "A100"}),
        lambda p: p["metadata"]["annotations"].update({"hami.io/gpu-scheduler-policy": "spread"}),
    ):
        variant = copy.deepcopy(base)
        change(variant)
        variants.append(variant)
    cache = TranslationCache()
    decisions = [cache.decide(p, DEFAULT_POLICY, "ns") for p in [base, *variants]]
    assert cache.hits == 0 and len(cache) == len(variants) + 1
    for pod, decision in zip([base, *variants], decisions, strict=True):
        assert decision == translate_pod(pod, DEFAULT_POLICY, "ns")
    assert cache.decide(base, DEFAULT_POLICY, "other-ns") is not decisions[0]


def test_what_the_translation_does_not_read_hits() -> None:
    cache = TranslationCache()
    first = cache.decide(cache_pod(), DEFAULT_POLICY, "ns")
    other = cache_pod()
    other["metadata"].update(generateName="rs2-", uid="u", annotations={"y": "2"})
    other["spec"]["containers"][0].update(image="j", args=["--x"], ports=[{"containerPort": 1}])
    other["spec"].update(nodeSelector={"gpu": "true"}, tolerations=[])
    assert cache.decide(other, DEFAULT_POLICY, "ns") is first and cache.hits == 1


def test_labels_the_translation_does_not_read_hit() -> None:
    """A StatefulSet's or an indexed Job's pods differ in labels of their own: one entry."""
    cache = TranslationCache()
    pods = []
    for index in range(3):
        pod = cache_pod(**{"nvidia.com/gpumem": "1000"})
        pod["metadata"]["labels"].update(
            {
                "statefulset.kubernetes.io/pod-name": f"trainer-{index}",
                "apps.kubernetes.io/pod-index": str(index),
            }
        )
        pods.append(pod)
    decisions = [cache.decide(pod, DEFAULT_POLICY, "ns") for pod in pods]
    assert cache.hits == 2 and len(cache) == 1
    for pod, decision in zip(pods, decisions, strict=True):
        assert decision == translate_pod(pod, DEFAULT_POLICY, "ns")


def test_a_new_policy_empties_the_cache() -> None:
    cache = TranslationCache()
    cache.decide(cache_pod(), DEFAULT_POLICY, "ns")
    other = policy_from_mapping({"nvidia": {"defaultCores": 10}}).policy
    decision = cache.decide(cache_pod(**{"nvidia.com/gpumem": "100"}), other, "ns")
    assert len(cache) == 1 and cache.hits == 0
    assert isinstance(decision, Converted)
    assert decision.plan[0].share is not None and decision.plan[0].share.cores == 10


def test_the_cache_is_bounded_in_bytes() -> None:
    cache = TranslationCache(max_bytes=40_000, max_entry_bytes=20_000)
    for memory in range(1, 200):
        cache.decide(cache_pod(**{"nvidia.com/gpumem": str(memory)}), DEFAULT_POLICY, "ns")
        assert cache.bytes <= 40_000
    assert 0 < len(cache) < 199
    # The newest entries stay; the oldest went first.
    cache.hits = 0
    cache.decide(cache_pod(**{"nvidia.com/gpumem": "199"}), DEFAULT_POLICY, "ns")
    assert cache.hits == 1
    cache.decide(cache_pod(**{"nvidia.com/gpumem": "1"}), DEFAULT_POLICY, "ns")
    assert cache.hits == 1
    # One pod cannot take it over: an entry over max_entry_bytes is decided, not kept.
    huge = cache_pod()
    huge["spec"]["containers"][0]["env"] = [
        {"name": f"V{i}", "value": "x" * 100} for i in range(300)
    ]
    before = (len(cache), cache.bytes)
    assert isinstance(cache.decide(huge, DEFAULT_POLICY, "ns"), Converted)
    assert (len(cache), cache.bytes) == before


def test_unserializable_views_are_decided_not_kept() -> None:
    cache = TranslationCache()
    pod = cache_pod()
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem"] = 2**70
    assert cache.decide(pod, DEFAULT_POLICY, "ns") == translate_pod(pod, DEFAULT_POLICY, "ns")
    assert len(cache) == 0


def test_pods_read_from_yaml_get_their_own_decisions_where_json_would_mix_them_up() -> None:
    """`dry-run` and `convert` cache decisions for pods read from YAML, whose values JSON cannot
    always tell apart: a date and its text, an infinity and null, 1.0 and 1 (orjson writes
    1.0, but the same for -0.0 and 0.0 is not true of every type), True and "true". Each pod
    gets what translating it alone gives, however the pods before it were keyed."""

    def cache_pod(memory: Any, gpu_type: Any = "A100") -> dict[str, Any]:
        limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": memory}
        return {
            "metadata": {"annotations": {"nvidia.com/use-gputype": gpu_type}},
            "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]},
        }

    variants = [
        cache_pod(1000),
        cache_pod(1000.0),
        cache_pod("1000"),
        cache_pod(True),
        cache_pod("true"),
        cache_pod(float("inf")),
        cache_pod(None),
        cache_pod(-0.0),
        cache_pod(0),
        cache_pod(1000, datetime.date(2024, 1, 1)),
        cache_pod(1000, "2024-01-01"),
    ]
    cache = TranslationCache(from_yaml=True)
    for _ in range(2):
        for pod in variants:
            assert cache.decide(pod, DEFAULT_POLICY, None) == translate_pod(pod, DEFAULT_POLICY)
    assert cache.hits == len(variants)
    decisions = {repr(translate_pod(pod, DEFAULT_POLICY)) for pod in variants}
    assert len(decisions) > 3  # the variants are not all decided alike
