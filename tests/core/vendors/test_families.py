"""core/vendors/families.py: the device families a policy knows, from each profile listed in
PROFILES and the families without a DRA driver. The chart's DeviceClasses and matchConditions,
`check` and `scan` read this table, so it is pinned field by field."""

from __future__ import annotations

from typing import Any

from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY, policy_from_mapping
from hami_dra_webhook.core.vendors.families import (
    BY_KEY,
    PROFILES,
    container_families,
    converted_names,
    families,
    names_a_family,
)
from hami_dra_webhook.core.vendors.profile import Family

CUSTOM = policy_from_mapping(
    {
        "hamiDraWebhook": {
            "vendors": {
                "hygon": {
                    "convert": True,
                    "driverName": "hcu.example.com",
                    "deviceClassName": "hcu-class",
                },
                "ascend": {"convert": True},
                "amd": {"convert": True, "driverName": "amd.example.com"},
                "awsNeuron": {"convert": True},
            }
        },
        # AMD's count renamed to NVIDIA's: NVIDIA keeps it (it is converted first).
        "amd": {
            "resourceCountName": "nvidia.com/gpu",
            "resourceMemoryName": "",
            "resourceCoreName": "amd.com/cores",
        },
        "cambricon": {"resourceCountName": "cambricon.com/special"},
    }
).policy


def _row(family: Family) -> tuple[Any, ...]:
    return (
        family.key,
        family.title,
        family.converted,
        family.driver,
        family.device_class,
        family.class_expression,
        family.enable,
    )


def test_every_profile_is_listed_once_by_its_key() -> None:
    assert [p.key for p in PROFILES] == ["nvidia", "hygon", "ascend", "amd", "aws-neuron"]
    assert {key: p.key for key, p in BY_KEY.items()} == {p.key: p.key for p in PROFILES}


def test_the_default_policy_converts_nvidia_only() -> None:
    known = families(DEFAULT_POLICY)
    nvidia = '"hami-core-gpu.project-hami.io"'
    assert [_row(f) for f in known.all[:5]] == [
        (
            "nvidia",
            "NVIDIA GPU",
            True,
            "hami-core-gpu.project-hami.io",
            "hami-core-gpu.project-hami.io",
            f'device.driver == {nvidia} && device.attributes[{nvidia}].type == "hami-gpu"',
            "",
        ),
        (
            "hygon",
            "Hygon DCU/HCU",
            False,
            "dra.hygon.com",
            "dra.hygon.com",
            'device.driver == "dra.hygon.com" && device.attributes["dra.hygon.com"].type == "hcu"',
            "hamiDraWebhook.vendors.hygon.convert: true",
        ),
        (
            "ascend",
            "Huawei Ascend NPU",
            False,
            "ascend.project-hami.io",
            "hami-vnpu-core.project-hami.io",
            'device.driver == "ascend.project-hami.io" && device.attributes["ascend.project-hami.io"].type == "HAMivNPUCore"',
            "hamiDraWebhook.vendors.ascend.convert: true",
        ),
        (
            "amd",
            "AMD GPU",
            False,
            "gpu.amd.com",
            "gpu.amd.com",
            'device.driver == "gpu.amd.com"',
            "hamiDraWebhook.vendors.amd.convert: true",
        ),
        (
            "aws-neuron",
            "AWS Neuron device",
            False,
            "neuron.aws.com",
            "neuron.aws.com",
            'device.driver == "neuron.aws.com"',
            "hamiDraWebhook.vendors.awsNeuron.convert: true",
        ),
    ]
    assert known.get("nvidia").names == (
        "nvidia.com/gpu",
        "nvidia.com/gpumem",
        "nvidia.com/gpumem-percentage",
        "nvidia.com/gpucores",
        "nvidia.com/priority",
    )
    assert known.get("hygon").names == (
        "hygon.com/dcunum",
        "hygon.com/hcunum",
        "hygon.com/dcumem",
        "hygon.com/hcumem",
        "hygon.com/dcucores",
        "hygon.com/hcucores",
    )
    assert known.get("ascend").names[:3] == (
        "huawei.com/Ascend910A",
        "huawei.com/Ascend910A-memory",
        "huawei.com/Ascend910A-core",
    )
    assert len(known.get("ascend").names) == 21
    assert known.get("amd").names == ("amd.com/gpu", "amd.com/gpumem", "amd.com/gpucores")
    assert known.get("aws-neuron").names == ("aws.amazon.com/neuron", "aws.amazon.com/neuroncore")
    assert [f.key for f in known.converted] == ["nvidia"]
    assert converted_names(DEFAULT_POLICY) == known.get("nvidia").names
    assert known.converted_names() == known.get("nvidia").names


def test_the_families_without_a_driver_are_named_by_their_domains() -> None:
    known = families(DEFAULT_POLICY)
    others = [f for f in known.all if f.driver is None]
    assert [(f.key, f.title, f.converted, f.device_class, f.enable) for f in others] == [
        ("enflame", "Enflame GCU", False, None, ""),
        ("metax", "MetaX GPU", False, None, ""),
        ("iluvatars", "Iluvatar GPU", False, None, ""),
        ("cambricon", "Cambricon MLU", False, None, ""),
        ("mthreads", "Moore Threads GPU", False, None, ""),
        ("kunlun", "Kunlunxin XPU", False, None, ""),
        ("vastai", "Vastai VA", False, None, ""),
        ("biren", "Biren GPU", False, None, ""),
    ]
    assert sorted(known.by_domain) == [
        "birentech.com",
        "cambricon.com",
        "enflame.com",
        "iluvatar.ai",
        "kunlunxin.com",
        "metax-tech.com",
        "mthreads.com",
        "vastaitech.com",
    ]
    assert known.of("cambricon.com/anything").key == "cambricon"  # type: ignore[union-attr]
    assert known.of("nvidia.com/gpumem").key == "nvidia"  # type: ignore[union-attr]
    assert known.of("nvidia.com/other") is None
    assert known.of("gpu") is None
    assert sorted(known.name_domains) == [
        "amd.com",
        "aws.amazon.com",
        "birentech.com",
        "cambricon.com",
        "enflame.com",
        "huawei.com",
        "hygon.com",
        "kunlunxin.com",
        "metax-tech.com",
        "mthreads.com",
        "nvidia.com",
        "vastaitech.com",
    ]
    assert known.all_names == frozenset(known.by_name)
    assert "cambricon.com/vmlu" in known.all_names


def test_a_policy_sets_each_familys_names_driver_and_class() -> None:
    known = families(CUSTOM)
    assert [f.key for f in known.converted] == ["nvidia", "hygon", "ascend", "amd", "aws-neuron"]
    hygon, amd = known.get("hygon"), known.get("amd")
    assert (hygon.driver, hygon.device_class) == ("hcu.example.com", "hcu-class")
    assert hygon.class_expression == (
        'device.driver == "hcu.example.com" && device.attributes["hcu.example.com"].type == "hcu"'
    )
    assert amd.names == ("nvidia.com/gpu", "amd.com/cores")  # an empty name is no name
    assert amd.class_expression == 'device.driver == "amd.example.com"'
    assert known.by_name["nvidia.com/gpu"].key == "nvidia"
    assert known.by_name["amd.com/cores"].key == "amd"
    assert known.get("cambricon").names[0] == "cambricon.com/special"
    assert "amd.com/cores" in converted_names(CUSTOM)


def test_not_converted_says_what_to_set() -> None:
    known = families(DEFAULT_POLICY)
    assert known.get("hygon").not_converted(["hygon.com/dcunum"]) == (
        "Hygon DCU/HCU (hygon.com/dcunum) is not converted by this policy (set"
        " hamiDraWebhook.vendors.hygon.convert: true to convert it to dra.hygon.com)"
    )
    assert known.get("metax").not_converted(["metax-tech.com/gpu"]) == (
        "MetaX GPU has no DRA driver, so this webhook cannot convert it"
    )


def test_which_containers_name_a_family() -> None:
    def container(limits: Any = None, requests: Any = None) -> dict[str, Any]:
        resources: dict[str, Any] = {}
        if limits is not None:
            resources["limits"] = limits
        if requests is not None:
            resources["requests"] = requests
        return {"name": "c", "resources": resources}

    known = families(DEFAULT_POLICY)
    both = container(
        {"nvidia.com/gpu": "1", "cambricon.com/x": "1", "cpu": "1", 3: "1"},
        {"nvidia.com/gpu": "1", "hygon.com/dcunum": "1", "example.com/x": "1"},
    )
    assert container_families(both, known) == {
        "nvidia": ["nvidia.com/gpu"],
        "cambricon": ["cambricon.com/x"],
        "hygon": ["hygon.com/dcunum"],
    }
    for nothing in (
        container(),
        container("no", []),
        {"name": "c", "resources": "no"},
        {"name": "c"},
        "not a container",
    ):
        assert container_families(nothing, known) == {}
        assert not names_a_family(nothing, DEFAULT_POLICY)
    assert names_a_family(container({"nvidia.com/gpumem": "1"}), DEFAULT_POLICY)
    assert names_a_family(container(None, {"cambricon.com/x": "1"}), DEFAULT_POLICY)
    assert names_a_family(container({"huawei.com/Ascend310P": "1"}), DEFAULT_POLICY)
    assert not names_a_family(container({"example.com/x": "1", 3: "1"}), DEFAULT_POLICY)
    assert not names_a_family(container({"cambricon": "1"}), DEFAULT_POLICY)


def test_a_name_of_two_slashes_belongs_to_the_domain_before_the_first() -> None:
    known = families(DEFAULT_POLICY)
    assert known.of("cambricon.com/a/b").key == "cambricon"  # type: ignore[union-attr]
    container = {"resources": {"limits": {"cambricon.com/a/b": "1", "cambricon.com/c": "1"}}}
    assert container_families(container, known) == {
        "cambricon": ["cambricon.com/a/b", "cambricon.com/c"]
    }
    assert names_a_family({"resources": {"limits": {"cambricon.com/a/b": "1"}}}, DEFAULT_POLICY)


def test_the_families_of_a_policy_are_made_once_and_kept_for_a_few_policies() -> None:
    from hami_dra_webhook.core.vendors import families as module

    other = policy_from_mapping({"nvidia": {"defaultMemory": 10}}).policy
    first = families(DEFAULT_POLICY)
    assert families(other) is families(other)
    assert families(DEFAULT_POLICY) is first  # kept while another was asked about
    assert families(other).get("nvidia") == first.get("nvidia")
    many = [policy_from_mapping({"nvidia": {"defaultMemory": i}}).policy for i in range(70)]
    for policy in many:
        families(policy)
        assert len(module._KNOWN) <= module.MAX_POLICIES
