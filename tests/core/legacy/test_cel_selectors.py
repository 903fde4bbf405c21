"""The CEL selectors we emit, evaluated with cel-python against HAMi driver-shaped devices.

A Python restatement of legacy HAMi's matching is the oracle: CEL must select exactly the devices
legacy HAMi would have let the pod use.
"""

from __future__ import annotations

from typing import Any

import pytest
from celpy.evaluation import CELEvalError
from hypothesis import given, settings
from hypothesis import strategies as st

from hami_dra_webhook.core.legacy.selectors import ascii_upper, device_filter, split_list
from hami_dra_webhook.core.settings.policy import policy_from_mapping
from hami_dra_webhook.core.translate.pod import translate_pod
from tests.support.cel_k8s import DRIVER, GI, evaluate, hami_device, selects

POLICY = policy_from_mapping({"hamiDraWebhook": {"deviceMemorySizes": ["80Gi", "40Gi"]}}).policy
DEVICES = [
    hami_device(0, "NVIDIA A100-SXM4-80GB", 80 * GI, uuid="GPU-a100-80"),
    hami_device(1, "NVIDIA A100-PCIE-40GB", 40 * GI, uuid="GPU-a100-40"),
    hami_device(2, "Tesla V100-SXM2-16GB", 16 * GI, uuid="GPU-v100"),
    hami_device(3, "Tesla T4", 15 * GI + 861 * (1 << 20), uuid="GPU-t4"),
    hami_device(4, "NVIDIA H100 80GB HBM3", 80 * GI, uuid="GPU-h100"),
    hami_device(5, "NVIDIA A100-SXM4-80GB", 80 * GI, uuid="GPU-other", driver="gpu.nvidia.com"),
]
OURS = [d for d in DEVICES if d["driver"] == DRIVER]


def legacy_type(product: str) -> str:
    return product if product.startswith("NVIDIA") else "NVIDIA-" + product


def legacy_allows(device: dict[str, Any], annotations: dict[str, str]) -> bool:
    """Legacy HAMi v2.10's checks, restated in Python."""
    if device["driver"] != DRIVER:
        return False
    attrs = device["attributes"][DRIVER]
    kind = legacy_type(attrs["productName"]).upper()
    if (items := split_list(annotations.get("nvidia.com/use-gpuuuid", ""))) and attrs[
        "uuid"
    ] not in items:
        return False
    if (items := split_list(annotations.get("nvidia.com/nouse-gpuuuid", ""))) and attrs[
        "uuid"
    ] in items:
        return False
    if (items := split_list(annotations.get("nvidia.com/use-gputype", ""))) and not any(
        ascii_upper(i) in kind for i in items
    ):
        return False
    items = split_list(annotations.get("nvidia.com/nouse-gputype", ""))
    return not (items and any(ascii_upper(i) in kind for i in items))


def chosen(annotations: dict[str, str]) -> list[str]:
    selectors = device_filter(annotations, POLICY).selectors
    return [d["attributes"][d["driver"]]["uuid"] for d in DEVICES if selects(selectors, d)]


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({}, ["GPU-a100-80", "GPU-a100-40", "GPU-v100", "GPU-t4", "GPU-h100"]),
        ({"nvidia.com/use-gputype": "A100"}, ["GPU-a100-80", "GPU-a100-40"]),
        ({"nvidia.com/use-gputype": "a100-sxm4"}, ["GPU-a100-80"]),
        # The legacy type of a Tesla card is "NVIDIA-Tesla ...": the prefix must match too.
        ({"nvidia.com/use-gputype": "nvidia-tesla"}, ["GPU-v100", "GPU-t4"]),
        (
            {"nvidia.com/use-gputype": "NVIDIA"},
            ["GPU-a100-80", "GPU-a100-40", "GPU-v100", "GPU-t4", "GPU-h100"],
        ),
        ({"nvidia.com/use-gputype": "v100, t4"}, ["GPU-v100", "GPU-t4"]),
        ({"nvidia.com/nouse-gputype": "A100,H100"}, ["GPU-v100", "GPU-t4"]),
        ({"nvidia.com/use-gputype": "A100", "nvidia.com/nouse-gputype": "PCIE"}, ["GPU-a100-80"]),
        ({"nvidia.com/use-gpuuuid": "GPU-v100 , GPU-t4"}, ["GPU-v100", "GPU-t4"]),
        ({"nvidia.com/use-gpuuuid": "gpu-v100"}, []),  # UUIDs match exactly, case included
        (
            {"nvidia.com/nouse-gpuuuid": "GPU-a100-80,GPU-h100"},
            ["GPU-a100-40", "GPU-v100", "GPU-t4"],
        ),
        ({"nvidia.com/use-gpuuuid": "GPU-a100-80", "nvidia.com/nouse-gpuuuid": "GPU-a100-80"}, []),
        (
            {"nvidia.com/use-gputype": ","},
            ["GPU-a100-80", "GPU-a100-40", "GPU-v100", "GPU-t4", "GPU-h100"],
        ),
        ({"nvidia.com/use-gpuuuid": 'GPU-v100"] || true || ["'}, []),
        ({"nvidia.com/use-gputype": 'x") || true || ("'}, []),
        ({"nvidia.com/use-gpuuuid": "\\"}, []),
    ],
)
def test_selectors_choose_what_legacy_chose(
    annotations: dict[str, str], expected: list[str]
) -> None:
    assert chosen(annotations) == expected
    assert expected == [
        d["attributes"][DRIVER]["uuid"] for d in DEVICES if legacy_allows(d, annotations)
    ]


FRAGMENT = st.one_of(
    st.sampled_from(["a100", "A100-SXM4", "nvidia-", "Tesla", "t4", "80GB", "h100 80", "NVIDIA A"]),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=8),
)
LIST = st.lists(FRAGMENT, max_size=3).map(", ".join)


@settings(max_examples=150, deadline=None)
@given(
    use=LIST,
    nouse=LIST,
    uuids=st.lists(st.sampled_from(["GPU-t4", "GPU-v100", 'GPU"]', " GPU-h100 "]), max_size=3),
)
def test_selectors_match_legacy_for_any_annotation(use: str, nouse: str, uuids: list[str]) -> None:
    annotations = {
        "nvidia.com/use-gputype": use,
        "nvidia.com/nouse-gputype": nouse,
        "nvidia.com/use-gpuuuid": ",".join(uuids),
    }
    selectors = device_filter(annotations, POLICY).selectors
    for device in DEVICES:
        assert selects(selectors, device) == legacy_allows(device, annotations), device["name"]


def selectors_of(subrequest: dict[str, Any]) -> list[str]:
    return [s["cel"]["expression"] for s in subrequest["selectors"]]


def test_percentage_alternatives_pin_each_device_size() -> None:
    pod = {
        "spec": {
            "containers": [
                {"name": "c", "resources": {"limits": {"nvidia.com/gpumem-percentage": "25"}}}
            ]
        }
    }
    template = translate_pod(pod, POLICY).templates[0]
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    by_size = {}
    for alternative in request["firstAvailable"]:
        matching = [
            d["attributes"][DRIVER]["uuid"] for d in OURS if selects(selectors_of(alternative), d)
        ]
        by_size[alternative["capacity"]["requests"]["memory"]] = matching
    assert by_size == {
        "20Gi": ["GPU-a100-80", "GPU-h100"],  # 25% of 81920 MiB
        "10Gi": ["GPU-a100-40"],  # 25% of 40960 MiB
    }


def test_the_driver_guard_comes_first() -> None:
    """kube-scheduler evaluates selectors in order and stops at the first false one; an error
    (an attribute domain the device lacks) fails the whole allocation. So the driver and type
    guard must come first, and must not error itself on another driver's device."""
    selectors = device_filter({"nvidia.com/use-gpuuuid": "GPU-other"}, POLICY).selectors
    other = DEVICES[5]
    assert evaluate(selectors[0], other) == False  # noqa: E712 (a CEL BoolType)
    with pytest.raises(CELEvalError, match="no such key"):
        evaluate(selectors[1], other)
    assert selects(selectors, other) is False


def test_the_10_kib_selector_limit_is_exact() -> None:
    """A selector of exactly 10 KiB is accepted, one byte more is refused with 422."""
    from hami_dra_webhook.core.legacy.selectors import MAX_SELECTOR_LENGTH, device_filter
    from hami_dra_webhook.core.model.types import NotConvertible
    from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY

    assert MAX_SELECTOR_LENGTH == 10 * 1024
    base = len(device_filter({"nvidia.com/use-gpuuuid": "x"}, DEFAULT_POLICY).selectors[-1]) - 1
    # A value itself is at most 4 KiB: escaped characters (6 bytes each) reach the limit.
    escaped, plain = divmod(MAX_SELECTOR_LENGTH - base, 6)
    at_limit = "\u00e9" * escaped + "x" * plain
    selector = device_filter({"nvidia.com/use-gpuuuid": at_limit}, DEFAULT_POLICY).selectors[-1]
    assert len(selector.encode()) == MAX_SELECTOR_LENGTH
    with pytest.raises(NotConvertible) as raised:
        device_filter({"nvidia.com/use-gpuuuid": at_limit + "x"}, DEFAULT_POLICY)
    assert raised.value.code == 422 and "10 KiB" in raised.value.message


@pytest.mark.parametrize("key", ["nvidia.com/use-gpuuuid", "nvidia.com/nouse-gputype"])
def test_a_value_that_cannot_be_a_cel_literal_is_refused_not_dropped(key: str) -> None:
    """A lone surrogate cannot become a CEL string: refusing keeps the constraint; dropping it
    would widen the device choice."""
    from hami_dra_webhook.core.legacy.selectors import device_filter
    from hami_dra_webhook.core.model.types import NotConvertible
    from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY

    with pytest.raises(NotConvertible) as raised:
        device_filter({key: "GPU-1,\ud800"}, DEFAULT_POLICY)
    assert raised.value.code == 422 and "cannot be used" in raised.value.message


def test_a_doubled_prefix_is_fixed_where_it_first_appears() -> None:
    from hami_dra_webhook.core.legacy.selectors import _never_matching

    (warning,) = _never_matching("nvidia.com/use-gputype", ["NVIDIA-NVIDIA x NVIDIA-NVIDIA y"])
    assert warning.endswith("write 'NVIDIA x NVIDIA-NVIDIA y'")
