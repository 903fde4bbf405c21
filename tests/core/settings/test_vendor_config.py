"""core/settings/vendor_config.py: HAMi's vendor sections of device-config.yaml read as HAMi reads them
(absent ones: HAMi v2.10's defaults), and this webhook's `hamiDraWebhook.vendors` settings."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from hami_dra_webhook.core.settings.vendor_config import (
    DEFAULT_VNPUS,
    HAMI_VENDOR_SECTIONS,
    HygonSettings,
    VnpuChip,
    hami_vendor_sections,
    section_names,
)


def _chip_row(chip: VnpuChip) -> tuple[Any, ...]:
    return (
        chip.chip_name,
        chip.common_word,
        chip.resource_name,
        chip.resource_memory_name,
        chip.resource_core_name,
        chip.memory_allocatable,
        chip.memory_capacity,
        chip.memory_factor,
        chip.runtime_class_name,
        chip.super_pod,
        tuple((t.name, t.memory, t.ai_core, t.ai_cpu) for t in chip.templates),
    )


def _names(word: str) -> tuple[str, str, str]:
    return (f"huawei.com/{word}", f"huawei.com/{word}-memory", f"huawei.com/{word}-core")


B_32G = (("vir05_1c_16g", 16384, 5, 1), ("vir10_3c_32g", 32768, 10, 3))


def test_the_default_vnpus_are_hamis() -> None:
    """HAMi v2.10's charts/hami/templates/scheduler/device-configmap.yaml, chip by chip."""
    assert [_chip_row(chip) for chip in DEFAULT_VNPUS] == [
        (
            "910A",
            "Ascend910A",
            *_names("Ascend910A"),
            32768,
            32768,
            1,
            "",
            False,
            (
                ("vir02", 2184, 2, 0),
                ("vir04", 4369, 4, 0),
                ("vir08", 8738, 8, 0),
                ("vir16", 17476, 16, 0),
            ),
        ),
        (
            "910B2",
            "Ascend910B2",
            *_names("Ascend910B2"),
            65536,
            65536,
            1,
            "",
            False,
            (
                ("vir03_1c_8g", 8192, 3, 1),
                ("vir06_1c_16g", 16384, 6, 1),
                ("vir12_3c_32g", 32768, 12, 3),
            ),
        ),
        ("910B3", "Ascend910B3", *_names("Ascend910B3"), 65536, 65536, 1, "", False, B_32G),
        ("910B4-1", "Ascend910B4-1", *_names("Ascend910B4-1"), 65536, 65536, 1, "", False, B_32G),
        (
            "910B4",
            "Ascend910B4",
            *_names("Ascend910B4"),
            32768,
            32768,
            1,
            "",
            False,
            (("vir05_1c_8g", 8192, 5, 1), ("vir10_3c_16g", 16384, 10, 3)),
        ),
        (
            "310P3",
            "Ascend310P",
            *_names("Ascend310P"),
            21527,
            24576,
            1,
            "",
            False,
            (("vir01", 3072, 1, 1), ("vir02", 6144, 2, 2), ("vir04", 12288, 4, 4)),
        ),
        ("Ascend910", "Ascend910C", *_names("Ascend910C"), 65536, 65536, 1, "", True, B_32G),
    ]


def test_absent_sections_are_hamis_defaults() -> None:
    sections = hami_vendor_sections({})
    assert sections.vnpus == DEFAULT_VNPUS
    assert (sections.hygon.resource_count_name, sections.hygon.memory_factor) == (
        "hygon.com/dcunum",
        1,
    )
    assert sections.hygon.resource_memory_name == "hygon.com/dcumem"
    assert sections.hygon.resource_core_name == "hygon.com/dcucores"
    assert (
        sections.amd.resource_count_name,
        sections.amd.resource_memory_name,
        sections.amd.resource_core_name,
    ) == ("amd.com/gpu", "amd.com/gpumem", "amd.com/gpucores")
    assert (
        sections.awsneuron.resource_count_name,
        sections.awsneuron.resource_memory_name,
        sections.awsneuron.resource_core_name,
    ) == ("aws.amazon.com/neuron", "", "aws.amazon.com/neuroncore")
    assert sections.others == ()


def test_sections_are_read_as_hami_reads_them() -> None:
    chip = {
        "chipName": "X1",
        "commonWord": "AscendX1",
        "resourceName": "huawei.com/AscendX1",
        "resourceMemoryName": "huawei.com/AscendX1-memory",
        "memoryAllocatable": 100,
        "memoryCapacity": 120,
        "memoryFactor": 2,
        "runtimeClassName": "ascend",
        "templates": [{"name": "big", "memory": 50}, {"name": "small", "memory": 10, "aiCore": 1}],
    }
    sections = hami_vendor_sections(
        {
            "hygon": {"resourceCountName": "hygon.com/x", "memoryFactor": 4},
            "vnpus": {"hamiVnpuCore": True, "configs": [chip]},  # HAMi >= 2.10's shape
            "amd": {"resourceCountName": "amd.com/x"},
            "awsneuron": {"resourceMemoryName": "aws.amazon.com/m"},  # no count: not taken
            "cambricon": {"resourceCountName": "cambricon.com/x", "resourceMemoryName": ""},
            "enflame": [
                {"resourceCountName": "enflame.com/a"},
                {"resourceVCountName": "enflame.com/b"},
            ],
            "metax": {"other": "metax-tech.com/x"},  # no resource names: not listed
            "unknownvendor": {"resourceCountName": "x.com/y"},
        }
    )
    assert sections.hygon.resource_count_name == "hygon.com/x"
    assert sections.hygon.memory_factor == 4
    (read,) = sections.vnpus
    assert (read.chip_name, read.resource_core_name, read.memory_factor) == ("X1", "", 2)
    assert read.runtime_class_name == "ascend" and read.super_pod is False
    assert [(t.name, t.ai_core, t.ai_cpu) for t in read.templates] == [
        ("small", 1, 0),
        ("big", 0, 0),
    ]  # smallest first
    assert sections.amd.resource_count_name == "amd.com/x"
    assert sections.amd.resource_memory_name == ""
    assert sections.awsneuron.resource_count_name == "aws.amazon.com/neuron"
    assert sections.others == (
        ("enflame", ("enflame.com/a", "enflame.com/b")),
        ("cambricon", ("cambricon.com/x",)),
    )
    assert hami_vendor_sections({"vnpus": [chip]}).vnpus == (read,)  # the older list shape
    assert hami_vendor_sections({"vnpus": []}).vnpus == DEFAULT_VNPUS
    assert hami_vendor_sections({"vnpus": {"configs": None}}).vnpus == DEFAULT_VNPUS
    assert hami_vendor_sections({"hygon": "no"}).hygon.resource_count_name == "hygon.com/dcunum"
    assert hami_vendor_sections({"amd": "no"}).amd.resource_count_name == "amd.com/gpu"
    neuron = hami_vendor_sections({"awsneuron": {"resourceCountName": "aws.amazon.com/n"}})
    assert neuron.awsneuron.resource_count_name == "aws.amazon.com/n"
    assert neuron.awsneuron.resource_core_name == ""  # the section replaces the default whole


def test_section_names() -> None:
    assert section_names({"resourceCountName": "a/b", "resourceX": 3, "other": "c/d"}) == ("a/b",)
    assert section_names([{"resourceA": "a/1"}, "no", {"resourceB": "a/2", "resourceC": ""}]) == (
        "a/1",
        "a/2",
    )
    assert section_names("no") == ()
    assert section_names({7: "a/b"}) == ()
    assert {"hygon", "vnpus", "amd", "awsneuron", "cambricon", "biren"} <= HAMI_VENDOR_SECTIONS


def test_hygon_compute_units() -> None:
    assert HygonSettings.model_validate({"computeUnits": [120, 128, 120]}).compute_units == (
        128,
        120,
    )
    assert HygonSettings.model_validate({"computeUnits": None}).compute_units == ()
    assert HygonSettings.model_validate({}).compute_units == ()
    for wrong, words in (
        ([0], "positive whole numbers"),
        ([True], "positive whole numbers"),
        ("120", "positive whole numbers"),
        ([1.5], "positive whole numbers"),
        (list(range(1, 10)), "at most 8 distinct values"),
    ):
        with pytest.raises(ValidationError, match=words):
            HygonSettings.model_validate({"computeUnits": wrong})
    assert len(HygonSettings.model_validate({"computeUnits": list(range(1, 9))}).compute_units) == 8
