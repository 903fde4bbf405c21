"""core/vendors/unknown.py: names of a legacy domain with HAMi's shape that the configuration
does not know (an old chip name, a sibling of none), each with what to write instead."""

from __future__ import annotations

from typing import Any

from hami_dra_webhook.core.model.types import Attention
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from hami_dra_webhook.core.vendors.unknown import _either, _split, unknown_keys, unknown_names

PENDING = "no device plugin offers it, so the pod stays Pending"


def _container(limits: dict[Any, str], requests: dict[Any, str] | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {"limits": limits}
    if requests is not None:
        resources["requests"] = requests
    return {"name": "c", "resources": resources}


def test_an_old_chip_name_names_its_replacements() -> None:
    assert unknown_keys(_container({"huawei.com/Ascend910B": "1"}), DEFAULT_POLICY) == {
        "huawei.com/Ascend910B": "huawei.com/Ascend910B was HAMi's name for 910B NPUs from"
        " v2.4.0 to v2.6.1 (split by chip in v2.7); no device plugin of this configuration"
        " offers it, so the pod stays Pending: write huawei.com/Ascend910B2,"
        " huawei.com/Ascend910B3 or huawei.com/Ascend910B4 (the chip of its nodes)"
    }


def test_an_old_chip_names_sibling_keeps_its_suffix() -> None:
    found = unknown_keys(_container({"huawei.com/Ascend910B-memory": "1"}), DEFAULT_POLICY)
    assert found["huawei.com/Ascend910B-memory"].endswith(
        "write huawei.com/Ascend910B2-memory, huawei.com/Ascend910B3-memory or"
        " huawei.com/Ascend910B4-memory (the chip of its nodes)"
    )


def test_a_sibling_of_no_known_name_names_the_siblings_of_its_kind() -> None:
    found = unknown_keys(_container({"nvidia.com/gpu-memory": "1"}), DEFAULT_POLICY)
    assert found == {
        "nvidia.com/gpu-memory": "nvidia.com/gpu-memory is not a resource this configuration"
        f" knows, and {PENDING}: write the name the device config gives (NVIDIA GPU:"
        " nvidia.com/gpumem or nvidia.com/gpumem-percentage)"
    }
    # The device's own siblings first, one of the kind asked: a single name.
    found = unknown_keys(_container({"huawei.com/Ascend310P-mem": "1"}), DEFAULT_POLICY)
    assert found["huawei.com/Ascend310P-mem"].endswith(
        "(Huawei Ascend NPU: huawei.com/Ascend310P-memory)"
    )
    # No sibling of that kind: every sibling of the device.
    found = unknown_keys(_container({"amd.com/gpu-percentage": "1"}), DEFAULT_POLICY)
    assert found["amd.com/gpu-percentage"].endswith("(AMD GPU: amd.com/gpumem or amd.com/gpucores)")


def test_names_that_are_not_reported() -> None:
    for limits in (
        {"nvidia.com/gpu": "1", "nvidia.com/gpu-memory": "1"},  # refused by the translation
        {"huawei.com/Ascend310P-core": "1"},  # known
        {"huawei.com/Ascend910B3": "1"},  # known
        {"hygon.com/dcu-cores": "1"},  # no family has the name hygon.com/dcu
        {"example.com/gpu-mem": "1"},  # not a legacy domain
        {"cambricon.com/mlu-mem": "1"},  # a family without a driver: reported as such
        {"huawei.com/whatever": "1"},  # no sibling suffix, not renamed
        {"cpu": "1", 7: "1"},  # no domain, not a string
    ):
        assert unknown_keys(_container(limits), DEFAULT_POLICY) == {}, limits


def test_requests_are_read_and_each_name_said_once() -> None:
    container = _container(
        {"nvidia.com/gpu-memory": "1"},
        {"nvidia.com/gpu-memory": "1", "huawei.com/Ascend910B": "1"},
    )
    assert list(unknown_keys(container, DEFAULT_POLICY)) == [
        "nvidia.com/gpu-memory",
        "huawei.com/Ascend910B",
    ]
    pod = {
        "spec": {
            "initContainers": [{**container, "name": "setup"}],
            "containers": [{**container, "name": "app"}],
        }
    }
    said = unknown_names(pod, DEFAULT_POLICY)
    assert all(isinstance(line, Attention) for line in said)
    assert [line.split(": ", 1)[0] for line in said] == [
        'init container "setup"',
        'init container "setup"',
    ]
    assert unknown_names({"spec": "no"}, DEFAULT_POLICY) == []
    assert unknown_names([], DEFAULT_POLICY) == []


def test_splitting_and_listing() -> None:
    assert _split("huawei.com/Ascend910B-memory") == ("huawei.com/Ascend910B", "-memory")
    assert _split("nvidia.com/gpumem") == ("nvidia.com/gpu", "mem")
    assert _split("a/b-core") == ("a/b", "-core")
    assert _split("huawei.com/memory") == ("huawei.com/memory", "")  # nothing before it
    assert _split("x-core") == ("x-core", "")  # no domain
    assert _split("a/core") == ("a/core", "")
    assert _either(["a"]) == "a"
    assert _either(["a", "b"]) == "a or b"
    assert _either(iter(["a", "b", "c"])) == "a, b or c"


def test_the_hint_is_of_the_kind_asked_and_at_most_four_names() -> None:
    from hami_dra_webhook.core.settings.policy import policy_from_mapping

    hint = unknown_keys(_container({"nvidia.com/gpu-percentage": "1"}), DEFAULT_POLICY)
    assert hint["nvidia.com/gpu-percentage"].endswith("(NVIDIA GPU: nvidia.com/gpumem-percentage)")
    hint = unknown_keys(_container({"nvidia.com/gpu-core": "1"}), DEFAULT_POLICY)
    assert hint["nvidia.com/gpu-core"].endswith("(NVIDIA GPU: nvidia.com/gpucores)")
    chips = [
        {
            "chipName": f"C{i}",
            "commonWord": f"C{i}",
            "resourceName": f"huawei.com/npu{i}",
            "resourceMemoryName": f"huawei.com/mem{i}",
            "resourceCoreName": f"huawei.com/core{i}",
            "memoryAllocatable": 100,
            "memoryCapacity": 100,
        }
        for i in range(6)
    ]
    policy = policy_from_mapping({"vnpus": chips}).policy
    hint = unknown_keys(_container({"huawei.com/npu0-memory": "1"}), policy)
    assert hint["huawei.com/npu0-memory"].endswith(
        "(Huawei Ascend NPU: huawei.com/mem0, huawei.com/mem1, huawei.com/mem2 or huawei.com/mem3)"
    )


def test_each_unknown_name_is_found_after_a_known_or_odd_one() -> None:
    container = _container(
        {
            "huawei.com/Ascend310P": "1",  # known
            "cambricon.com/mlu-mem": "1",  # a family without a driver
            "example.com/gpu-mem": "1",  # no legacy domain
            "huawei.com/Ascend910B": "1",
        }
    )
    assert list(unknown_keys(container, DEFAULT_POLICY)) == ["huawei.com/Ascend910B"]
