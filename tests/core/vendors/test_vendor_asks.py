"""What each vendor's profile asks of its driver (the DeviceAsk a template is written from), and
how its annotations are read: the fields the rule cases' templates show only in part."""

from __future__ import annotations

from typing import Any

import pytest

from hami_dra_webhook.core.outcome.ask import MAX_CAPACITY_ENTRIES, Alternative, DeviceAsk
from hami_dra_webhook.core.outcome.decision import Converted, Refusal
from hami_dra_webhook.core.settings.policy import policy_from_yaml
from hami_dra_webhook.core.translate.pod import translate_pod
from tests.support.policies import every_vendor

CONVERTING = policy_from_yaml(every_vendor(hygon="computeUnits: [120]")).policy
HAMI_CORE = {"huawei.com/vnpu-mode": "hami-core"}


def _pod(limits: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "annotations": annotations or {}},
        "spec": {"containers": [{"name": "main", "resources": {"limits": limits}}]},
    }


def _ask(limits: dict[str, str], annotations: dict[str, str] | None = None) -> DeviceAsk:
    decision = translate_pod(_pod(limits, annotations), CONVERTING, "team-a")
    assert isinstance(decision, Converted), decision
    (planned,) = decision.plan
    assert planned.ask is not None
    return planned.ask


@pytest.mark.parametrize(
    ("limits", "annotations", "fields", "shares"),
    [
        (
            {"hygon.com/dcunum": "2"},
            None,
            ("hygon", "dra.hygon.com", "hcu", 2, "dra.hygon.com/uuid", True),
            False,
        ),
        (
            {"hygon.com/dcunum": "1", "hygon.com/dcumem": "100"},
            None,
            ("hygon", "dra.hygon.com", "hcu", 1, "dra.hygon.com/uuid", False),
            True,
        ),
        (
            {"hygon.com/dcunum": "1", "hygon.com/dcucores": "100"},
            None,
            ("hygon", "dra.hygon.com", "hcu", 1, "dra.hygon.com/uuid", True),
            False,
        ),
        (
            {"huawei.com/Ascend310P": "2"},
            HAMI_CORE,
            (
                "ascend",
                "hami-vnpu-core.project-hami.io",
                "npu",
                2,
                "ascend.project-hami.io/uuid",
                False,
            ),
            True,
        ),
        ({"amd.com/gpu": "3"}, None, ("amd", "gpu.amd.com", "gpu", 3, None, True), False),
        (
            {"aws.amazon.com/neuron": "1"},
            None,
            ("aws-neuron", "neuron.aws.com", "neuron", 1, None, True),
            False,
        ),
        (
            {"nvidia.com/gpu": "1"},
            None,
            (
                "nvidia",
                "hami-core-gpu.project-hami.io",
                "gpu",
                1,
                "hami-core-gpu.project-hami.io/uuid",
                True,
            ),
            False,
        ),
    ],
)
def test_each_profiles_ask(
    limits: dict[str, str],
    annotations: dict[str, str] | None,
    fields: tuple[Any, ...],
    shares: bool,
) -> None:
    ask = _ask(limits, annotations)
    assert (
        ask.family,
        ask.device_class,
        ask.request_name,
        ask.count,
        ask.distinct_attribute,
        ask.whole,
    ) == fields
    decision = translate_pod(_pod(limits, annotations), CONVERTING, "team-a")
    assert isinstance(decision, Converted)
    assert decision.plan[0].shares_a_gpu is shares
    assert decision.plan[0].family == fields[0]


def test_hygon_cores_on_one_card_model_are_one_alternative_without_a_name() -> None:
    ask = _ask({"hygon.com/dcunum": "1", "hygon.com/dcucores": "50"})
    (only,) = ask.alternatives
    assert only.name == ""
    assert only.capacity == (("cores", "60"),)
    assert only.selectors[-1] == (
        'device.capacity["dra.hygon.com"].cores.compareTo(quantity("120")) == 0'
    )


@pytest.mark.parametrize(
    ("limits", "key"),
    [
        ({"hygon.com/dcunum": "1"}, "hygon.com/use-gpuuuid"),
        ({"hygon.com/dcunum": "1"}, "hygon.com/nouse-hcutype"),
        ({"amd.com/gpu": "1"}, "amd.com/use-gputype"),
    ],
)
def test_an_annotation_that_lists_nothing_is_said(limits: dict[str, str], key: str) -> None:
    decision = translate_pod(_pod(limits, {key: " , "}), CONVERTING, "team-a")
    assert isinstance(decision, Converted)
    assert f"annotation {key} lists nothing, so it adds no constraint" in decision.warnings


@pytest.mark.parametrize(
    ("limits", "key", "annotations"),
    [
        ({"hygon.com/dcunum": "1"}, "hygon.com/use-gpuuuid", {}),
        ({"hygon.com/dcunum": "1"}, "hygon.com/use-dcutype", {}),
        ({"amd.com/gpu": "1"}, "amd.com/nouse-gputype", {}),
        ({"huawei.com/Ascend310P": "1"}, "hami.io/use-Ascend310P-uuid", HAMI_CORE),
    ],
)
def test_an_annotation_that_cannot_be_a_cel_literal_is_refused_by_name(
    limits: dict[str, str], key: str, annotations: dict[str, str]
) -> None:
    decision = translate_pod(
        _pod(limits, {**annotations, key: "ok,bad\ud800"}), CONVERTING, "team-a"
    )
    assert isinstance(decision, Refusal)
    assert decision.code == 422
    assert decision.message == (
        f"annotation {key} cannot be used: the value holds an invalid character U+D800"
    )


def test_a_vendors_annotation_too_long_is_refused() -> None:
    decision = translate_pod(
        _pod({"hygon.com/dcunum": "1"}, {"hygon.com/use-gpuuuid": "a," * 3000}),
        CONVERTING,
        "team-a",
    )
    assert isinstance(decision, Refusal)
    assert decision.reason == "annotation-too-long"
    assert decision.message.startswith("annotation hygon.com/use-gpuuuid is 6000 characters long")


def test_which_annotations_are_ascends_uuid_lists() -> None:
    from hami_dra_webhook.core.legacy.annotations import is_ascend_uuid_key

    assert is_ascend_uuid_key("hami.io/use-Ascend310P-uuid")
    assert is_ascend_uuid_key("hami.io/no-use-Ascend910B3-uuid")
    for other in (
        "hami.io/use-Ascend310P",
        "hami.io/other-Ascend310P-uuid",
        "huawei.com/use-x-uuid",
        "hami.io/use-x-UUID",
    ):
        assert not is_ascend_uuid_key(other), other


def test_an_annotation_at_its_bound_is_read_and_one_over_it_refused() -> None:
    from hami_dra_webhook.core.legacy.annotations import annotation_items
    from hami_dra_webhook.core.legacy.selectors import MAX_ANNOTATION_VALUE

    warnings: list[str] = []
    at_bound = "a" * MAX_ANNOTATION_VALUE
    assert annotation_items({"k": at_bound}, "k", warnings) == [at_bound]
    assert warnings == []
    assert annotation_items({"k": 7}, "k", warnings) == []  # not a string: lists nothing
    assert warnings == ["annotation k lists nothing, so it adds no constraint"]
    assert annotation_items({}, "k", warnings) == []
    decision = translate_pod(
        _pod({"amd.com/gpu": "1"}, {"amd.com/use-gputype": "a" * (MAX_ANNOTATION_VALUE + 1)}),
        CONVERTING,
        "team-a",
    )
    assert isinstance(decision, Refusal)
    assert (decision.code, decision.reason) == (422, "annotation-too-long")
    assert decision.message == (
        f"annotation amd.com/use-gputype is {MAX_ANNOTATION_VALUE + 1} characters long; legacy"
        f" values are short UUID or type lists (at most {MAX_ANNOTATION_VALUE}): list fewer"
    )


def test_amds_cores_100_alone_is_one_whole_gpu() -> None:
    ask = _ask({"amd.com/gpucores": "100"})
    assert (ask.count, ask.whole, ask.summary) == (1, True, "1 whole AMD GPU")


def test_nvidias_plan_carries_the_notes_it_warned() -> None:
    from hami_dra_webhook.core.outcome.decision import EXCLUSIVE_CORES_NOTE, PRIORITY_NOTE

    limits = {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpumem": "1000",
        "nvidia.com/gpucores": "100",
        "nvidia.com/priority": "0",
    }
    decision = translate_pod(_pod(limits), CONVERTING, "team-a")
    assert isinstance(decision, Converted)
    priority = PRIORITY_NOTE.format(name="nvidia.com/priority", env="CUDA_TASK_PRIORITY")
    assert decision.plan[0].notes == (priority, EXCLUSIVE_CORES_NOTE)
    assert f'container "main": {priority}' in decision.warnings
    assert f'container "main": {EXCLUSIVE_CORES_NOTE}' in decision.warnings
    plain = translate_pod(_pod({"nvidia.com/gpu": "1"}), CONVERTING, "team-a")
    assert isinstance(plain, Converted) and plain.plan[0].notes == ()


def test_an_ask_keeps_to_the_capacity_rules_of_kubernetes_1_38() -> None:
    """1.38 validates a request's `capacity.requests`: at most 32 entries, none negative."""
    most = tuple((f"c{i}", "1") for i in range(MAX_CAPACITY_ENTRIES))
    assert len(Alternative(("true",), most).capacity) == 32
    with pytest.raises(ValueError, match="33 capacity requests: at most 32"):
        Alternative(("true",), (*most, ("c32", "1")))
    with pytest.raises(ValueError, match="negative capacity request"):
        Alternative(("true",), (("memory", "-1Mi"),))
