"""Small rules of the core that the rule cases reach only in part: an excluded namespace, a pod
of too many containers, which keys are legacy keys, and how a vendor's values are read."""

from __future__ import annotations

from typing import Any

import pytest

from hami_dra_webhook.core.legacy.request import has_legacy_keys, read_vendor_request
from hami_dra_webhook.core.model.types import ContainerRef, NotConvertible
from hami_dra_webhook.core.outcome.decision import Refusal, Unchanged, excluded_namespace
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from hami_dra_webhook.core.translate.pod_checks import MAX_CONTAINERS_PER_POD, too_many_containers

REF = ContainerRef("containers", 0, "main")


def test_an_excluded_namespace_is_left_with_a_word() -> None:
    left = excluded_namespace("kube-system", frozenset({"kube-system"}))
    note = "namespace kube-system is excluded from conversion; nothing changed"
    assert left == Unchanged(warnings=[note], left_alone=note)
    assert excluded_namespace("team-a", frozenset({"kube-system"})) is None
    assert excluded_namespace(None, frozenset({"kube-system"})) is None


def test_too_many_containers_refused_only_with_a_legacy_key() -> None:
    count = MAX_CONTAINERS_PER_POD + 1
    plain = [{"name": "c", "resources": {"limits": {"cpu": "1"}}}] * 3
    left = too_many_containers(count, iter(plain), DEFAULT_POLICY)
    assert left == Unchanged(warnings=[])
    gpu = [*plain, {"name": "g", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]
    refused = too_many_containers(count, iter(gpu), DEFAULT_POLICY)
    assert refused == Refusal(
        code=422,
        message=f"the pod has {count} containers; at most {MAX_CONTAINERS_PER_POD} are"
        " converted in one pod",
        warnings=[],
        reason="too-many-containers",
    )


def test_legacy_keys_in_limits_or_requests() -> None:
    names = frozenset({"nvidia.com/gpu"})

    def container(limits: Any = None, requests: Any = None) -> dict[str, Any]:
        return {"resources": {"limits": limits or {}, "requests": requests or {}}}

    assert has_legacy_keys(container({"nvidia.com/gpu": "1"}), names)
    assert has_legacy_keys(container(None, {"nvidia.com/gpu": "1"}), names)
    assert not has_legacy_keys(container({"cpu": "1"}, {"memory": "1"}), names)
    assert not has_legacy_keys(container(), names)


def test_a_vendors_values_are_read_by_role() -> None:
    container = {
        "resources": {
            "limits": {"v.com/n": "2", "v.com/m": "300"},
            "requests": {"v.com/n": "2", "v.com/c": "40"},
        }
    }
    request = read_vendor_request(container, REF, "v.com/n", "v.com/m", ("", "v.com/c"))
    assert (request.count, request.memory, request.cores) == (2, 300, 40)
    assert request.in_limits == ("v.com/n", "v.com/m")
    assert request.in_requests == ("v.com/n", "v.com/c")
    assert read_vendor_request(container, REF, "v.com/n").memory is None
    assert read_vendor_request(container, REF, "", "v.com/m").count is None


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        (
            {"v.com/n": "1", "v.com/m": "1.5"},
            'container "main": limits v.com/m=1.5 is not a whole number; m is in MiB: write'
            " e.g. 16384 for 16 GiB",
        ),
        (
            {"v.com/n": "x"},
            'container "main": limits v.com/n=x is not a Kubernetes quantity; write a non-negative'
            " whole number",
        ),
    ],
)
def test_a_vendors_wrong_value_is_refused_with_its_unit(
    limits: dict[str, str], message: str
) -> None:
    with pytest.raises(NotConvertible) as raised:
        read_vendor_request({"resources": {"limits": limits}}, REF, "v.com/n", "v.com/m")
    assert raised.value.code == 422
    assert raised.value.message == message


def test_two_spellings_of_one_role_are_refused() -> None:
    container = {"resources": {"limits": {"h.com/a": "1", "h.com/b": "1"}}}
    with pytest.raises(NotConvertible) as raised:
        read_vendor_request(container, REF, ("h.com/a", "h.com/b"))
    assert raised.value.code == 422
    assert "h.com/a" in raised.value.message and "h.com/b" in raised.value.message


@pytest.mark.parametrize(
    "limits",
    [
        {"cpu": "1", "nvidia.com/vgpu": "1", "nvidia.com/gpu": "1"},
        {"example.com/x": "1", "nvidia.com/vgpu": "1", "nvidia.com/gpu": "1"},
        {"nvidia.com/gpu": "1", "nvidia.com/a/b": "1"},
    ],
)
def test_an_unknown_nvidia_name_is_found_after_any_other(limits: dict[str, str]) -> None:
    from hami_dra_webhook.core.translate.pod import translate_pod

    pod = {"spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}}
    decision = translate_pod(pod, DEFAULT_POLICY, "ns")
    assert isinstance(decision, Refusal) and decision.reason == "unknown-gpu-resource"


def test_an_unknown_nvidia_name_in_requests_only_is_found() -> None:
    from hami_dra_webhook.core.translate.pod import translate_pod

    pod = {
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "resources": {
                        "limits": {"nvidia.com/gpu": "1"},
                        "requests": {"nvidia.com/gpu": "1", "nvidia.com/vgpu": "1"},
                    },
                }
            ]
        }
    }
    decision = translate_pod(pod, DEFAULT_POLICY, "ns")
    assert isinstance(decision, Refusal) and decision.reason == "unknown-gpu-resource"


def test_a_renamed_default_is_kept_and_an_unknown_name_after_it_refused() -> None:
    from hami_dra_webhook.core.settings.policy import policy_from_mapping
    from hami_dra_webhook.core.translate.pod import translate_pod

    policy = policy_from_mapping({"nvidia": {"resourceCountName": "nvidia.com/vgpu"}}).policy
    limits = {"nvidia.com/vgpu": "1", "nvidia.com/gpu": "1", "nvidia.com/foo": "1"}
    pod = {"spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}}
    decision = translate_pod(pod, policy, "ns")
    assert isinstance(decision, Refusal) and decision.reason == "unknown-gpu-resource"
    assert "nvidia.com/foo" in decision.message
    known_only = {"nvidia.com/vgpu": "1", "nvidia.com/gpu": "1"}
    kept = translate_pod(
        {"spec": {"containers": [{"name": "c", "resources": {"limits": known_only}}]}},
        policy,
        "ns",
    )
    assert not isinstance(kept, Refusal)


def test_a_key_that_is_not_a_string_is_no_resource_name() -> None:
    from hami_dra_webhook.core.translate.pod import translate_pod

    limits: dict[Any, str] = {5: "1", "nvidia.com/gpu": "1"}
    pod = {"spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}}
    assert translate_pod(pod, DEFAULT_POLICY, "ns").outcome == "converted"


@pytest.mark.parametrize(
    "resources",
    [
        {"limits": {"nvidia.com/gpu": 1, "cpu": "1"}},
        {"requests": {"nvidia.com/gpumem": 1000}},
        {"limits": {"hygon.com/dcunum": 1}},
    ],
)
def test_gpu_resources_at_pod_level_are_refused_with_where_to_put_them(
    resources: dict[str, Any],
) -> None:
    """kube-apiserver takes only cpu, memory and hugepages in pod-level resources, and 1.38 no
    claims there: a legacy resource there would otherwise pass the webhook without a word."""
    from hami_dra_webhook.core.translate.pod import translate_pod

    pod = {"spec": {"resources": resources, "containers": [{"name": "c", "image": "x"}]}}
    decision = translate_pod(pod, DEFAULT_POLICY)
    assert isinstance(decision, Refusal)
    assert decision.code == 422 and decision.reason == "pod-level-gpu-resources"
    key = next(iter(next(iter(resources.values()))))
    assert f"pod-level resources (spec.resources) name {key}" in decision.message
    assert "move them to the resources of the container" in decision.message
    plain = {"spec": {"resources": {"limits": {"cpu": "1"}}, "containers": [{"name": "c"}]}}
    assert translate_pod(plain, DEFAULT_POLICY) == Unchanged(warnings=[])
