"""The policy's vendors beyond NVIDIA: HAMi's own device-config.yaml sections (`hygon:`, `vnpus:`,
`amd:`, `awsneuron:`, and the names of every other family), read unchanged, plus this webhook's
`hamiDraWebhook.vendors` and `hamiDraWebhook.otherVendors` settings.

The facts relied on are in docs/vendor-facts.md; where they are unverified the safe reading is
taken and said beside the setting.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

HYGON_DRIVER = "dra.hygon.com"
ASCEND_DRIVER = "ascend.project-hami.io"
ASCEND_CLASS = "hami-vnpu-core.project-hami.io"
AMD_DRIVER = "gpu.amd.com"
NEURON_DRIVER = "neuron.aws.com"
# Distinct compute-unit counts one Hygon request can offer as firstAvailable alternatives.
MAX_CU_ALTERNATIVES = 8


class _Section(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class HygonNames(_Section):
    """HAMi's `hygon:` section. v2.10 named the resources `dcu*`, later releases `hcu*` (HAMi PR
    #2969); both spellings are always read, and the configured names besides."""

    resource_count_name: str = Field("hygon.com/dcunum", alias="resourceCountName")
    resource_memory_name: str = Field("hygon.com/dcumem", alias="resourceMemoryName")
    resource_core_name: str = Field("hygon.com/dcucores", alias="resourceCoreName")
    memory_factor: int = Field(1, alias="memoryFactor", ge=1)


class VnpuTemplate(_Section):
    name: str
    memory: int = Field(ge=1)  # MiB
    ai_core: int = Field(0, alias="aiCore", ge=0)
    ai_cpu: int = Field(0, alias="aiCPU", ge=0)


class VnpuChip(_Section):
    """One entry of HAMi's `vnpus:` list (an Ascend chip), with HAMi's key names."""

    chip_name: str = Field(alias="chipName")
    common_word: str = Field(alias="commonWord")
    resource_name: str = Field(alias="resourceName")
    resource_memory_name: str = Field(alias="resourceMemoryName")
    resource_core_name: str = Field("", alias="resourceCoreName")
    memory_allocatable: int = Field(alias="memoryAllocatable", ge=1)
    memory_capacity: int = Field(alias="memoryCapacity", ge=1)
    memory_factor: int = Field(1, alias="memoryFactor", ge=1)
    runtime_class_name: str = Field("", alias="runtimeClassName")
    super_pod: bool = Field(False, alias="superPod")
    templates: tuple[VnpuTemplate, ...] = ()

    @field_validator("templates", mode="after")
    @classmethod
    def _smallest_first(cls, value: tuple[VnpuTemplate, ...]) -> tuple[VnpuTemplate, ...]:
        return tuple(sorted(value, key=lambda t: t.memory))


def _chip(
    chip: str,
    word: str,
    allocatable: int,
    capacity: int,
    templates: list[tuple[str, int, int, int]],
    super_pod: bool = False,
) -> VnpuChip:
    return VnpuChip.model_validate(
        {
            "chipName": chip,
            "commonWord": word,
            "resourceName": f"huawei.com/{word}",
            "resourceMemoryName": f"huawei.com/{word}-memory",
            "resourceCoreName": f"huawei.com/{word}-core",
            "memoryAllocatable": allocatable,
            "memoryCapacity": capacity,
            "superPod": super_pod,
            "templates": [
                {"name": n, "memory": m, "aiCore": c, "aiCPU": p} for n, m, c, p in templates
            ],
        }
    )


_910B_32G = [("vir05_1c_16g", 16384, 5, 1), ("vir10_3c_32g", 32768, 10, 3)]
# HAMi v2.10's default `vnpus:` list (charts/hami/templates/scheduler/device-configmap.yaml).
DEFAULT_VNPUS: tuple[VnpuChip, ...] = (
    _chip(
        "910A",
        "Ascend910A",
        32768,
        32768,
        [
            ("vir02", 2184, 2, 0),
            ("vir04", 4369, 4, 0),
            ("vir08", 8738, 8, 0),
            ("vir16", 17476, 16, 0),
        ],
    ),
    _chip(
        "910B2",
        "Ascend910B2",
        65536,
        65536,
        [
            ("vir03_1c_8g", 8192, 3, 1),
            ("vir06_1c_16g", 16384, 6, 1),
            ("vir12_3c_32g", 32768, 12, 3),
        ],
    ),
    _chip("910B3", "Ascend910B3", 65536, 65536, _910B_32G),
    _chip("910B4-1", "Ascend910B4-1", 65536, 65536, _910B_32G),
    _chip(
        "910B4",
        "Ascend910B4",
        32768,
        32768,
        [("vir05_1c_8g", 8192, 5, 1), ("vir10_3c_16g", 16384, 10, 3)],
    ),
    _chip(
        "310P3",
        "Ascend310P",
        21527,
        24576,
        [("vir01", 3072, 1, 1), ("vir02", 6144, 2, 2), ("vir04", 12288, 4, 4)],
    ),
    _chip("Ascend910", "Ascend910C", 65536, 65536, _910B_32G, super_pod=True),
)


class WholeDeviceNames(_Section):
    """HAMi's `amd:` or `awsneuron:` section (names only: these drivers share no device)."""

    resource_count_name: str = Field(alias="resourceCountName")
    resource_memory_name: str = Field("", alias="resourceMemoryName")
    resource_core_name: str = Field("", alias="resourceCoreName")


DEFAULT_AMD = WholeDeviceNames.model_validate(
    {
        "resourceCountName": "amd.com/gpu",
        "resourceMemoryName": "amd.com/gpumem",
        "resourceCoreName": "amd.com/gpucores",
    }
)
DEFAULT_NEURON = WholeDeviceNames.model_validate(
    {"resourceCountName": "aws.amazon.com/neuron", "resourceCoreName": "aws.amazon.com/neuroncore"}
)

# The families without a DRA driver (docs/vendor-facts.md): HAMi's section key, the name the
# user knows, HAMi v2.10's default resource names, and the domains their resources live in.
OTHER_FAMILIES: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...] = (
    (
        "enflame",
        "Enflame GCU",
        (
            "enflame.com/gcu",
            "enflame.com/drs-gcu",
            "enflame.com/gcu-memory",
            "enflame.com/gcu-core",
            "enflame.com/vgcu",
            "enflame.com/vgcu-percentage",
        ),
        ("enflame.com",),
    ),
    (
        "metax",
        "MetaX GPU",
        (
            "metax-tech.com/gpu",
            "metax-tech.com/sgpu",
            "metax-tech.com/vcore",
            "metax-tech.com/vmemory",
        ),
        ("metax-tech.com",),
    ),
    ("iluvatars", "Iluvatar GPU", (), ("iluvatar.ai",)),
    (
        "cambricon",
        "Cambricon MLU",
        (
            "cambricon.com/vmlu",
            "cambricon.com/mlu",
            "cambricon.com/mlu.smlu.vmemory",
            "cambricon.com/mlu.smlu.vcore",
        ),
        ("cambricon.com",),
    ),
    (
        "mthreads",
        "Moore Threads GPU",
        ("mthreads.com/vgpu", "mthreads.com/sgpu-memory", "mthreads.com/sgpu-core"),
        ("mthreads.com",),
    ),
    (
        "kunlun",
        "Kunlunxin XPU",
        ("kunlunxin.com/xpu", "kunlunxin.com/vxpu", "kunlunxin.com/vxpu-memory"),
        ("kunlunxin.com",),
    ),
    ("vastai", "Vastai VA", ("vastaitech.com/va",), ("vastaitech.com",)),
    ("biren", "Biren GPU", ("birentech.com/gpu",), ("birentech.com",)),
)
HAMI_VENDOR_SECTIONS = frozenset(
    {"hygon", "vnpus", "amd", "awsneuron", *(key for key, _, _, _ in OTHER_FAMILIES)}
)


def section_names(section: Any) -> tuple[str, ...]:
    """Every resource name a HAMi vendor section (a map, or a list of maps) configures: the
    string values of its keys that start with `resource`."""
    entries = section if isinstance(section, list) else [section]
    found: list[str] = []
    for entry in entries:
        if isinstance(entry, dict):
            found += [
                v
                for k, v in entry.items()
                if str(k).startswith("resource") and isinstance(v, str) and v
            ]
    return tuple(found)


class HygonSettings(_Section):
    convert: bool = False
    driver_name: str = Field(HYGON_DRIVER, alias="driverName")
    device_class_name: str = Field(HYGON_DRIVER, alias="deviceClassName")
    # The `cores` capacity (absolute compute units) of each Hygon card model in the cluster:
    # legacy cores are a percentage, DRA's are units. The webhook reads them from the driver's
    # ResourceSlices; these are the fallback (and what dry-run uses).
    compute_units: tuple[int, ...] = Field((), alias="computeUnits")

    @field_validator("compute_units", mode="before")
    @classmethod
    def _units(cls, value: object) -> tuple[int, ...]:
        if value is None:
            return ()
        if not isinstance(value, list | tuple) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value
        ):
            raise ValueError("must be a list of positive whole numbers, e.g. [120, 128]")
        if len(set(value)) > MAX_CU_ALTERNATIVES:
            raise ValueError(f"at most {MAX_CU_ALTERNATIVES} distinct values (DRA's alternatives)")
        return tuple(sorted(set(value), reverse=True))


class AscendSettings(_Section):
    convert: bool = False
    driver_name: str = Field(ASCEND_DRIVER, alias="driverName")
    device_class_name: str = Field(ASCEND_CLASS, alias="deviceClassName")
    # Pods without `huawei.com/vnpu-mode: hami-core` asked legacy HAMi for a hard-split vNPU
    # template; the DRA driver offers only the soft split. convert: legacy's rounding and
    # refusals applied, with a warning; refuse: such pods are refused.
    template_mode: Literal["convert", "refuse"] = Field("convert", alias="templateMode")
    # Set on converted pods that have none, where the chip's own `runtimeClassName` (HAMi's
    # vnpus entry) is empty. The DRA driver's containers need the Ascend runtime.
    runtime_class_name: str = Field("", alias="runtimeClassName")


class WholeDeviceSettings(_Section):
    convert: bool = False
    driver_name: str = Field(alias="driverName")
    device_class_name: str = Field(alias="deviceClassName")


class AmdSettings(WholeDeviceSettings):
    driver_name: str = Field(AMD_DRIVER, alias="driverName")
    device_class_name: str = Field(AMD_DRIVER, alias="deviceClassName")


class NeuronSettings(WholeDeviceSettings):
    driver_name: str = Field(NEURON_DRIVER, alias="driverName")
    device_class_name: str = Field(NEURON_DRIVER, alias="deviceClassName")


class VendorSettings(_Section):
    """`hamiDraWebhook.vendors`: which families beyond NVIDIA are converted, and how."""

    hygon: HygonSettings = Field(default_factory=HygonSettings)
    ascend: AscendSettings = Field(default_factory=AscendSettings)
    amd: AmdSettings = Field(default_factory=AmdSettings)
    aws_neuron: NeuronSettings = Field(default_factory=NeuronSettings, alias="awsNeuron")


class HamiVendorSections(_Section):
    """The HAMi device-config.yaml sections of the vendors beyond NVIDIA, as read."""

    hygon: HygonNames = Field(default_factory=HygonNames)
    vnpus: tuple[VnpuChip, ...] = DEFAULT_VNPUS
    amd: WholeDeviceNames = DEFAULT_AMD
    awsneuron: WholeDeviceNames = DEFAULT_NEURON
    # Configured names of the families without a DRA driver, by section key.
    others: tuple[tuple[str, tuple[str, ...]], ...] = ()


def hami_vendor_sections(document: dict[str, Any]) -> HamiVendorSections:
    """The vendor sections of a device-config.yaml document (absent ones: HAMi's defaults)."""
    values: dict[str, Any] = {}
    if isinstance(document.get("hygon"), dict):
        values["hygon"] = document["hygon"]
    vnpus = document.get("vnpus")
    if isinstance(vnpus, dict):  # HAMi >= 2.10: {hamiVnpuCore, configs: [...]}
        vnpus = vnpus.get("configs")
    if isinstance(vnpus, list) and vnpus:
        values["vnpus"] = vnpus
    for key in ("amd", "awsneuron"):
        if isinstance(document.get(key), dict) and document[key].get("resourceCountName"):
            values[key] = document[key]
    values["others"] = tuple(
        (key, section_names(document[key]))
        for key, _, _, _ in OTHER_FAMILIES
        if key in document and section_names(document[key])
    )
    return HamiVendorSections.model_validate(values)
