"""The policy: HAMi's own device-config.yaml (`nvidia:`) plus this webhook's section beside it.

A legacy cluster's file works unchanged. Our settings live under the top-level key
`hamiDraWebhook:` of the same file. No file at all gives working defaults.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import Any, Literal, NamedTuple

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from hami_dra_webhook.core.model.quantity import MIB, QuantityError, parse_byte_size
from hami_dra_webhook.core.settings.vendor_config import (
    HAMI_VENDOR_SECTIONS,
    HamiVendorSections,
    VendorSettings,
    hami_vendor_sections,
)

NVIDIA_SECTION = "nvidia"
WEBHOOK_SECTION = "hamiDraWebhook"
DEFAULT_DRIVER = "hami-core-gpu.project-hami.io"
MAX_BARE_MEMORY = 1 << 40  # 1 TiB: no GPU has more; a bigger bare number was meant as bytes
MAX_TEMPLATE_PREFIX = 40  # leaves room for the 16-character hash and a dash within 63
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*)$")
_CEL_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# HAMi `nvidia:` keys for the legacy device plugin and scheduler that have no DRA equivalent:
# accepted without a warning, recorded so that tooling can report them.
LEGACY_ONLY_KEYS = frozenset(
    {
        "deviceCoreScaling",
        "knownMigGeometries",
        "disablecorelimit",
        "migstrategy",
        # in HAMi v2.10's chart default (../shared/realworld/configs): the device plugin's
        "preConfiguredDeviceMemory",
        "enableNumaTopology",
        "migProfileAllowlist",
    }
)


class LegacyNames(NamedTuple):
    """The five legacy resource names by role (a tuple too: `in` and iteration work on it)."""

    gpus: str  # the count resource (resourceCountName)
    memory: str
    percentage: str
    cores: str
    priority: str


class PolicyError(ValueError):
    """The configuration cannot be used; the message names the key and what to change."""


class _Section(BaseModel):
    # Unknown keys are found by `_unknown_keys`, so the model keeps none: it stays hashable.
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class NvidiaConfig(_Section):
    """HAMi's `nvidia:` section, with HAMi's key names and defaults."""

    # An empty name means that resource does not exist (legacy HAMi accepts `""` the same way).
    resource_count_name: str = Field("nvidia.com/gpu", alias="resourceCountName")
    resource_memory_name: str = Field("nvidia.com/gpumem", alias="resourceMemoryName")
    resource_memory_percentage_name: str = Field(
        "nvidia.com/gpumem-percentage", alias="resourceMemoryPercentageName"
    )
    resource_core_name: str = Field("nvidia.com/gpucores", alias="resourceCoreName")
    resource_priority_name: str = Field("nvidia.com/priority", alias="resourcePriorityName")
    default_memory: int = Field(0, alias="defaultMemory", ge=0)
    default_cores: int = Field(0, alias="defaultCores", ge=0, le=100)
    default_gpu_num: int = Field(1, alias="defaultGPUNum", ge=0)
    memory_factor: int = Field(1, alias="memoryFactor", ge=1)
    gpu_core_policy: Literal["default", "force", "disable"] = Field(
        "default", alias="gpuCorePolicy"
    )
    overwrite_env: bool = Field(False, alias="overwriteEnv")
    runtime_class_name: str = Field("", alias="runtimeClassName")
    lib_cuda_log_level: int | None = Field(None, alias="libCudaLogLevel")
    # The legacy device plugin's: it injected GPU_CORE_UTILIZATION_POLICY=disable into every
    # GPU container (the webhook writes the same, unless gpuCorePolicy says otherwise).
    disable_core_limit: bool = Field(False, alias="disableCoreLimit")
    # The legacy device plugin registered each card's memory times this (int32 of MiB x
    # scaling): gpumem-percentage counts from it, so the webhook does too
    # (core/vendors/nvidia_notes.py says what DRA cannot keep of a scaling above 1).
    device_memory_scaling: float = Field(1.0, alias="deviceMemoryScaling", gt=0, le=100)
    # At most this many tasks per card in legacy HAMi (10 when unset); DRA has no such cap.
    device_split_count: int | None = Field(None, alias="deviceSplitCount", ge=0)


class CapacityKeys(_Section):
    memory: str = "memory"
    cores: str = "cores"


class AttributeNames(_Section):
    uuid: str = "uuid"
    product_name: str = Field("productName", alias="productName")
    type: str = "type"

    @field_validator("uuid", "product_name", "type")
    @classmethod
    def _cel_identifier(cls, value: str) -> str:
        if not _CEL_IDENTIFIER.match(value):
            raise ValueError(f"{value!r} is not a CEL identifier (letters, digits, underscore)")
        return value


class WebhookConfig(_Section):
    """This webhook's own settings (`hamiDraWebhook:`)."""

    driver_name: str = Field(DEFAULT_DRIVER, alias="driverName")
    device_class_name: str = Field(DEFAULT_DRIVER, alias="deviceClassName")
    capacity_keys: CapacityKeys = Field(default_factory=CapacityKeys, alias="capacityKeys")
    attributes: AttributeNames = Field(default_factory=AttributeNames)
    device_type: str = Field("hami-gpu", alias="deviceType", min_length=1)
    legacy_scheduler_name: str = Field("hami-scheduler", alias="legacySchedulerName")
    device_memory_sizes: tuple[int, ...] = Field((), alias="deviceMemorySizes")
    refuse_privileged: bool = Field(True, alias="refusePrivileged")
    # Where kube-apiserver drops consumable capacity (DRAConsumableCapacity off), shared GPU
    # requests would silently become whole GPUs: refused unless this is true (then a warning).
    allow_sharing_without_capacity: bool = Field(False, alias="allowSharingWithoutCapacity")
    # False where kube-apiserver drops consumable capacity: templates then carry no capacity
    # requests, as the server would store them anyway, so a stored template is byte for byte
    # what was written (core/translate/template_identity.py). The webhook sets it from its cluster
    # probe.
    consumable_capacity: bool = Field(True, alias="consumableCapacity")
    template_name_prefix: str = Field("hami-gpu-", alias="templateNamePrefix")
    # `nvidia.com/vgpu-mode: mig` asks for MIG instances, which the HAMi-core driver does not
    # make: refused (the default), or converted to a HAMi-core share of the same memory, with a
    # warning that MIG's hardware isolation becomes HAMi-core's software limits.
    mig_mode: Literal["refuse", "hami-core"] = Field("refuse", alias="migMode")
    # Families beyond NVIDIA this webhook converts (none unless turned on), and how.
    vendors: VendorSettings = Field(default_factory=VendorSettings)
    # Pods with resources of a family that is not converted (no DRA driver, or not turned on):
    # refused with the reason (the default), or left unchanged with a warning (legacy HAMi
    # keeps serving them).
    other_vendors: Literal["refuse", "leave"] = Field("refuse", alias="otherVendors")
    # Count-only pods (nvidia.com/gpu: N and nothing else) left to kube-scheduler, which gives
    # them N whole devices through the DeviceClass's extendedResourceName (1.36+, KEP-5004):
    # core/translate/whole_gpus.py says when that is exact. The chart sets the class's field from
    # this.
    whole_gpus_by_extended_resource: bool = Field(False, alias="wholeGpusByExtendedResource")

    @field_validator("driver_name", "device_class_name")
    @classmethod
    def _dns_subdomain(cls, value: str) -> str:
        if len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
            raise ValueError(f"{value!r} is not a DNS-1123 subdomain")
        return value

    @field_validator("template_name_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if len(value) > MAX_TEMPLATE_PREFIX or not _PREFIX.match(value):
            raise ValueError(
                f"{value!r} must be lower-case letters, digits and '-', start with a letter or"
                f" digit, and be at most {MAX_TEMPLATE_PREFIX} characters"
            )
        return value

    @field_validator("device_memory_sizes", mode="before")
    @classmethod
    def _sizes(cls, value: object) -> tuple[int, ...]:
        if value is None:
            return ()
        if not isinstance(value, list | tuple):
            raise ValueError("must be a list of quantities such as 80Gi or 40Gi")
        return tuple(sorted({_memory_size(item) for item in value}, reverse=True))


def _memory_size(item: object) -> int:
    """Bytes, from a quantity (`80Gi`) or a bare number, which is MiB as everywhere in HAMi."""
    bare = isinstance(item, int) and not isinstance(item, bool)
    if isinstance(item, str) and item.strip().isdigit():
        item, bare = int(item.strip()), True
    try:
        size = parse_byte_size(item * MIB if bare else item)  # type: ignore[operator, arg-type]
    except (QuantityError, ValueError, TypeError) as error:
        raise ValueError(f"{item!r} is not a memory size such as 80Gi") from error
    if bare and size > MAX_BARE_MEMORY:
        raise ValueError(
            f"{item!r} MiB is more than any GPU has (a bare number is MiB, as in HAMi);"
            " write sizes with a unit, e.g. 80Gi"
        )
    return size


class Policy(BaseModel):
    model_config = ConfigDict(frozen=True)

    nvidia: NvidiaConfig = Field(default_factory=NvidiaConfig)
    webhook: WebhookConfig = Field(default_factory=WebhookConfig)
    hami_vendors: HamiVendorSections = Field(default_factory=HamiVendorSections)

    @cached_property
    def hash_value(self) -> int:
        return hash((self.nvidia, self.webhook, self.hami_vendors))

    def with_webhook(self, webhook: WebhookConfig) -> Policy:
        """This policy with other webhook settings (a new object: cached values are per policy)."""
        return Policy(nvidia=self.nvidia, webhook=webhook, hami_vendors=self.hami_vendors)

    def __hash__(self) -> int:
        # The translation caches by policy; hashing every field on each lookup costs.
        return self.hash_value

    @cached_property
    def legacy_resource_names(self) -> LegacyNames:
        n = self.nvidia
        return LegacyNames(
            gpus=n.resource_count_name,
            memory=n.resource_memory_name,
            percentage=n.resource_memory_percentage_name,
            cores=n.resource_core_name,
            priority=n.resource_priority_name,
        )

    @cached_property
    def legacy_name_set(self) -> frozenset[str]:
        return frozenset(self.legacy_resource_names)

    @cached_property
    def largest_memory_mib(self) -> int:
        """The largest configured GPU memory size in MiB (0: none configured)."""
        return max(self.webhook.device_memory_sizes, default=0) // MIB

    @cached_property
    def legacy_domains(self) -> frozenset[str]:
        """The domains of the legacy resource names (`nvidia.com`): any other resource of these
        domains left in a converted container is one this configuration does not know."""
        return frozenset(
            name.split("/", 1)[0] for name in self.legacy_resource_names if "/" in name
        )


DEFAULT_POLICY = Policy()


class LoadedPolicy(BaseModel):
    model_config = ConfigDict(frozen=True)

    policy: Policy
    ignored_keys: tuple[str, ...]
    legacy_only_keys: tuple[str, ...] = ()

    @property
    def warning(self) -> str | None:
        if not self.ignored_keys:
            return None
        return "ignored configuration keys this webhook does not use: " + ", ".join(
            self.ignored_keys
        )


def policy_from_yaml(text: str, source: str = "device-config.yaml") -> LoadedPolicy:
    """Parse a device-config.yaml; unknown keys are reported, wrong types raise PolicyError."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise PolicyError(f"{source}: not valid YAML: {error}") from error
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise PolicyError(f"{source}: the top level must be a map with an `nvidia:` section")
    return policy_from_mapping(document, source)


def policy_from_mapping(
    document: dict[str, Any], source: str = "device-config.yaml"
) -> LoadedPolicy:
    sections: dict[str, Any] = {}
    ignored: list[str] = []
    for key, value in document.items():
        if key == NVIDIA_SECTION:
            sections["nvidia"] = value or {}
        elif key == WEBHOOK_SECTION:
            sections["webhook"] = value or {}
        elif key not in HAMI_VENDOR_SECTIONS:
            ignored.append(str(key))
    try:
        nvidia = NvidiaConfig.model_validate(sections.get("nvidia", {}))
        webhook = WebhookConfig.model_validate(sections.get("webhook", {}))
    except ValidationError as error:
        raise PolicyError(_describe(error, source)) from error
    try:
        vendors = hami_vendor_sections(document)
    except ValidationError as error:
        raise PolicyError(_describe_vendors(error, source)) from error
    unknown_nvidia = _unknown_keys(sections.get("nvidia", {}), NvidiaConfig, NVIDIA_SECTION)
    legacy_only = tuple(k for k in unknown_nvidia if k.split(".", 1)[1] in LEGACY_ONLY_KEYS)
    ignored += [k for k in unknown_nvidia if k not in legacy_only]
    ignored += _unknown_keys(sections.get("webhook", {}), WebhookConfig, WEBHOOK_SECTION)
    conflict = _whole_gpus_conflict(nvidia, webhook)
    if conflict:
        raise PolicyError(f"{source}: {conflict}")
    return LoadedPolicy(
        policy=Policy(nvidia=nvidia, webhook=webhook, hami_vendors=vendors),
        ignored_keys=tuple(ignored),
        legacy_only_keys=tuple(k.split(".", 1)[1] for k in legacy_only),
    )


def _whole_gpus_conflict(nvidia: NvidiaConfig, webhook: WebhookConfig) -> str:
    """wholeGpusByExtendedResource leaves count-only pods unconverted: it cannot go with a
    policy that adds to every GPU container (core/translate/whole_gpus.py), nor with a
    defaultMemory, which the webhook would give a count-only pod (`memory: <defaultMemory>Mi, cores:
    100`) where kube-scheduler's claim takes the whole card. The chart fails to render on the same
    list (hdw.validate)."""
    if not webhook.whole_gpus_by_extended_resource:
        return ""
    adds = [
        name
        for name, on in (
            ("nvidia.defaultMemory", nvidia.default_memory != 0),
            ("nvidia.overwriteEnv", nvidia.overwrite_env),
            ("nvidia.runtimeClassName", bool(nvidia.runtime_class_name)),
            ("nvidia.gpuCorePolicy", nvidia.gpu_core_policy != "default"),
            ("nvidia.libCudaLogLevel", nvidia.lib_cuda_log_level is not None),
        )
        if on
    ]
    if not adds:
        return ""
    return (
        "hamiDraWebhook.wholeGpusByExtendedResource leaves count-only pods to kube-scheduler,"
        f" which gives them whole GPUs, but {', '.join(adds)} must reach them (the webhook"
        " would write them): turn one of the two off"
    )


def _describe_vendors(error: ValidationError, source: str) -> str:
    problems = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"])
        problems.append(f"{where}: {item['msg']} (got {item.get('input')!r})")
    return (
        f"{source}: HAMi's vendor sections: "
        + "; ".join(problems)
        + "; fix them as HAMi's device-config.yaml has them, or remove them to use HAMi's defaults"
    )


def _unknown_keys(mapping: dict[str, Any], model: type[BaseModel], prefix: str) -> list[str]:
    """Keys of `mapping` (validated already) that `model` does not know, with nested sections."""
    by_alias = {(f.alias or name): f for name, f in model.model_fields.items()}
    by_alias |= {name: f for name, f in model.model_fields.items()}
    unknown = []
    for key, value in mapping.items():
        field = by_alias.get(key)
        if field is None:
            unknown.append(f"{prefix}.{key}")
        elif (
            isinstance(field.annotation, type)
            and issubclass(field.annotation, _Section)
            and isinstance(value, dict)
        ):
            unknown += _unknown_keys(value, field.annotation, f"{prefix}.{key}")
    return unknown


def _describe(error: ValidationError, source: str) -> str:
    section = NVIDIA_SECTION if error.title == NvidiaConfig.__name__ else WEBHOOK_SECTION
    problems = []
    for item in error.errors():
        where = ".".join(str(part) for part in (section, *item["loc"]))
        problems.append(f"{where}: {item['msg']} (got {item.get('input')!r})")
    return f"{source}: " + "; ".join(problems) + "; fix these keys or remove them to use defaults"
