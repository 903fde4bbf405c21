"""Huawei Ascend (docs/vendor-facts.md: Ascend): legacy `huawei.com/<chip>` to the HAMi Ascend
DRA driver's `hami-vnpu-core.project-hami.io` class (soft split, libvnpu), pinned to the chip
by `productName`.

`huawei.com/vnpu-mode: hami-core` pods are exact: memory as asked, cores as asked (absent: 0, as
legacy; the driver's default of 100 would make the card exclusive), n devices distinct by `uuid`
with the same capacity on each (the driver requires it), 910C's 1 -> 2 rule.

Pods without it asked legacy for hard-split vNPU templates; the driver offers only the soft
split. Legacy's rounding and refusals are applied (the pod gets at least what legacy gave it)
and a warning says isolation is soft now; `templateMode: refuse` refuses them instead.
"""

from __future__ import annotations

from typing import Any

from hami_dra_webhook.core.legacy.annotations import annotation_items, literal_list
from hami_dra_webhook.core.legacy.request import (
    MAX_CLAIM_DEVICES,
    LegacyRequest,
    read_vendor_request,
    resource_maps,
)
from hami_dra_webhook.core.model import cel
from hami_dra_webhook.core.model.quantity import MIB, QuantityError, format_mib, parse_quantity
from hami_dra_webhook.core.model.types import Attention, ContainerRef, NotConvertible
from hami_dra_webhook.core.outcome.ask import Alternative, DeviceAsk
from hami_dra_webhook.core.outcome.decision import ContainerPlan
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.settings.vendor_config import AscendSettings, VnpuChip
from hami_dra_webhook.core.vendors.profile import (
    Family,
    ProfileDefaults,
    Resolved,
    legacy_values,
    requests_only,
)
from hami_dra_webhook.core.vendors.quota_group import DeviceHold, QuotaGroup, present

FAMILY = "ascend"
QUOTA_PREFIX = "ascend/"  # + the chip's commonWord: one quota group per chip
DEVICE_TYPE = "HAMivNPUCore"
VNPU_MODE = "huawei.com/vnpu-mode"
HAMI_CORE = "hami-core"
SOFT_SPLIT_NOTE = (
    "vNPU template {template} becomes a soft split (libvnpu memory quota, not a hardware vNPU):"
    " isolation is soft now"
)


def use_uuid_key(chip: VnpuChip) -> str:
    return f"hami.io/use-{chip.common_word}-uuid"


def nouse_uuid_key(chip: VnpuChip) -> str:
    return f"hami.io/no-use-{chip.common_word}-uuid"


def hami_core_mode(annotations: dict[str, Any]) -> bool:
    return annotations.get(VNPU_MODE) == HAMI_CORE


def device_ask(
    chip: VnpuChip,
    request: LegacyRequest,
    ref: ContainerRef,
    annotations: dict[str, Any],
    settings: AscendSettings,
    warnings: list[str],
) -> DeviceAsk | None:
    count = request.count
    if count is None:
        # Legacy: no count in limits, not an NPU container; its values are ignored.
        warnings.append(
            Attention(
                f"{ref.label}: {chip.common_word} memory or cores without a count: legacy HAMi"
                " ignored them too; removed, the container gets no NPU"
            )
        )
        return None
    if count == 0:
        return None
    asked = count  # legacy's multi-device vNPU check reads the count as written, before 1 -> 2
    count = _device_count(chip, count, ref, warnings)
    memory_mib = request.memory * chip.memory_factor if request.memory else None
    cores = request.cores or 0
    if hami_core_mode(annotations):
        _check_hami_core(chip, request, count, memory_mib, cores, ref, warnings)
    else:
        memory_mib = _template_memory(chip, asked, memory_mib, cores, ref, settings, warnings)
    driver = settings.driver_name
    selectors = (
        cel.driver_device_of_type(driver, "type", DEVICE_TYPE),
        f"{cel.attribute(driver, 'productName')} == {cel.string_literal(chip.chip_name)}",
        *_uuid_selectors(chip, annotations, driver, warnings),
    )
    capacity: tuple[tuple[str, str], ...] = (("cores", str(cores)),)
    if memory_mib is not None:
        capacity += (("memory", format_mib(memory_mib)),)
    return DeviceAsk(
        family=FAMILY,
        device_class=settings.device_class_name,
        request_name="npu",
        count=count,
        alternatives=(Alternative(selectors, capacity),),
        distinct_attribute=f"{driver}/uuid",
        summary=_summary(chip, count, memory_mib, cores),
        whole=False,  # cores are always written (0 by default): a share, placed by capacity
    )


def _device_count(chip: VnpuChip, count: int, ref: ContainerRef, warnings: list[str]) -> int:
    """The NPUs the container gets: a super-pod chip's 1 is a module pair (as legacy HAMi)."""
    if chip.super_pod:
        if count == 1:
            count = 2
            warnings.append(
                f"{ref.label}: {chip.resource_name}=1 means a module pair, 2 NPUs (as legacy"
                " HAMi); DRA does not keep the pair on one module"
            )
        elif count % 2:
            raise NotConvertible(
                f"{ref.label}: {chip.resource_name}={count}: {chip.common_word} device request"
                " must be 1 or 2*n (as legacy HAMi); ask for an even number",
                code=422,
                reason="odd-npu-count",
            )
    if count > MAX_CLAIM_DEVICES:
        raise NotConvertible(
            f"{ref.label}: {count} NPUs are more than the {MAX_CLAIM_DEVICES} devices a DRA claim"
            f" can hold; request at most {MAX_CLAIM_DEVICES}",
            code=422,
            reason="too-many-devices",
        )
    return count


def _check_hami_core(
    chip: VnpuChip,
    request: LegacyRequest,
    count: int,
    memory_mib: int | None,
    cores: int,
    ref: ContainerRef,
    warnings: list[str],
) -> None:
    """hami-core (soft split) mode: memory and cores as asked, within what the chip has."""
    if memory_mib is not None and memory_mib > chip.memory_capacity:
        warnings.append(
            Attention(
                f"{ref.label}: {memory_mib} MiB is more than a {chip.chip_name} has"
                f" ({chip.memory_capacity} MiB): it can never be placed"
            )
        )
    if memory_mib is not None and count > 1:
        warnings.append(
            Attention(
                f"{ref.label}: {chip.resource_memory_name}={request.memory} is taken per NPU,"
                f" {format_mib(memory_mib)} on each of the {count} (as HAMi v2.10 reads it,"
                " which is what these pods got); ascend-device-plugin's docs call it the"
                " container's total: if that was meant, ask for"
                f" {(request.memory or 0) // count} per NPU"
            )
        )
    if cores > 100:
        raise NotConvertible(
            f"{ref.label}: {chip.resource_core_name}={cores} is above 100 (a percentage of"
            " the NPU); give 0 to 100",
            code=422,
            reason="cores-above-100",
        )


def _template_memory(
    chip: VnpuChip,
    count: int,
    memory_mib: int | None,
    cores: int,
    ref: ContainerRef,
    settings: AscendSettings,
    warnings: list[str],
) -> int | None:
    """Legacy template mode's rules (HAMi v2.10 `MutateAdmission`, `trimMemory`): the memory
    the pod got, None for the whole card."""
    if settings.template_mode == "refuse":
        raise NotConvertible(
            f"{ref.label}: {chip.resource_name} without the pod annotation"
            f" {VNPU_MODE}: {HAMI_CORE} asks for a hard-split vNPU template, which the DRA driver"
            f" does not offer: add the annotation (soft split), or set"
            " hamiDraWebhook.vendors.ascend.templateMode: convert",
            code=422,
            reason="ascend-template-mode",
        )
    if cores > 0:
        raise NotConvertible(
            f"{ref.label}: {chip.resource_core_name}={cores} is only supported in {HAMI_CORE}"
            f" (soft split) mode (as legacy HAMi): add the pod annotation {VNPU_MODE}:"
            f" {HAMI_CORE}, or remove it",
            code=422,
            reason="ascend-cores-need-hami-core",
        )
    template = None
    if memory_mib is not None and memory_mib < chip.memory_allocatable:
        template = next((t for t in chip.templates if t.memory >= memory_mib), None)
    if template is None:  # the whole card, as legacy gives it (above the largest template too)
        if memory_mib is not None and memory_mib > chip.memory_capacity:
            raise NotConvertible(
                f"{ref.label}: {chip.resource_memory_name} {memory_mib} is invalid: more than a"
                f" {chip.chip_name} has ({chip.memory_capacity} MiB), as legacy HAMi says",
                code=422,
                reason="memory-too-large",
            )
        return None
    if count > 1:
        raise NotConvertible(
            f"{ref.label}: {chip.common_word} vNPU not supported for multiple devices (as legacy"
            f" HAMi): ask for 1 NPU, or for whole NPUs ({chip.memory_allocatable} MiB or no"
            " memory)",
            code=422,
            reason="vnpu-multiple-devices",
        )
    if template.memory != memory_mib:
        warnings.append(
            f"{ref.label}: {memory_mib} MiB rounded up to vNPU template {template.name}"
            f" ({template.memory} MiB), as legacy HAMi"
        )
    warnings.append(Attention(f"{ref.label}: {SOFT_SPLIT_NOTE.format(template=template.name)}"))
    return template.memory


def _uuid_selectors(
    chip: VnpuChip, annotations: dict[str, Any], driver: str, warnings: list[str]
) -> list[str]:
    selectors = []
    uuid = cel.attribute(driver, "uuid")
    for key, negated in ((use_uuid_key(chip), False), (nouse_uuid_key(chip), True)):
        items = annotation_items(annotations, key, warnings)
        if items:
            expression = f"{uuid} in {literal_list(key, items)}"
            selectors.append(cel.negate(expression) if negated else expression)
            warnings.append(
                f"annotation {key}: matched against the driver's uuid attribute, which is the"
                " chip UUID only in driver builds that publish it"
            )
    return selectors


def _summary(chip: VnpuChip, count: int, memory_mib: int | None, cores: int) -> str:
    npus = (
        f"1 {chip.common_word} NPU" if count == 1 else f"{count} different {chip.common_word} NPUs"
    )
    memory = "the whole memory" if memory_mib is None else f"{memory_mib} MiB"
    compute = "no compute share (priority 0)" if cores == 0 else f"{cores}% compute"
    return f"{npus}, {memory}, {compute}"


class AscendProfile(ProfileDefaults):
    key = FAMILY

    def family(self, policy: Policy) -> Family:
        settings = policy.webhook.vendors.ascend
        names = tuple(
            n
            for chip in policy.hami_vendors.vnpus
            for n in (chip.resource_name, chip.resource_memory_name, chip.resource_core_name)
            if n
        )
        return Family(
            FAMILY,
            "Huawei Ascend NPU",
            names,
            settings.convert,
            settings.driver_name,
            settings.device_class_name,
            cel.driver_device_of_type(settings.driver_name, "type", DEVICE_TYPE),
            "hamiDraWebhook.vendors.ascend.convert: true",
        )

    def resolve(
        self,
        ref: ContainerRef,
        container: Any,
        annotations: dict[str, Any],
        policy: Policy,
        warnings: list[str],
    ) -> Resolved:
        settings = policy.webhook.vendors.ascend
        chip = _chip(container, ref, policy.hami_vendors.vnpus)
        request = read_vendor_request(
            container, ref, chip.resource_name, chip.resource_memory_name, chip.resource_core_name
        )
        requests_only(request, ref, warnings)
        ask = device_ask(chip, request, ref, annotations, settings, warnings)
        plan = ContainerPlan(ref, request, ask, FAMILY)
        runtime_class = chip.runtime_class_name or settings.runtime_class_name
        return (plan, legacy_values(container, request), runtime_class if ask else "")

    def quota_groups(self, policy: Policy) -> tuple[QuotaGroup, ...]:
        """HAMi names every chip's resources apart: one group per chip, its size the chip's
        `memoryAllocatable` (`pkg/device/ascend/device.go`)."""
        settings = policy.webhook.vendors.ascend
        if not settings.convert:
            return ()
        return tuple(
            QuotaGroup(
                QUOTA_PREFIX + chip.common_word,
                present(chip.resource_name),
                present(chip.resource_memory_name),
                present(chip.resource_core_name),
                chip.memory_factor,
                driver=settings.driver_name,
                device_class=settings.device_class_name,
                chip=chip.chip_name,
                largest_mib=chip.memory_allocatable * chip.memory_factor,
            )
            for chip in policy.hami_vendors.vnpus
        )

    def held(self, group: QuotaGroup, plan: ContainerPlan) -> DeviceHold:
        """Memory as asked (hami-core) or the vNPU template it is rounded to (the ask's);
        absent: the chip's; cores percent, absent = 0."""
        ask = plan.ask
        asked = ask.alternatives[0].capacity if ask else ()
        memory = next((_mib(v) for k, v in asked if k == "memory"), None)
        return DeviceHold(ask.count if ask else 0, memory, None, plan.request.cores or 0)


def _chip(container: Any, ref: ContainerRef, chips: tuple[VnpuChip, ...]) -> VnpuChip:
    """The one chip whose resources the container names (legacy gives a container one chip)."""
    limits, requests = resource_maps(container)
    keys = set(limits) | set(requests)
    named = [
        chip
        for chip in chips
        if keys & {chip.resource_name, chip.resource_memory_name, chip.resource_core_name}
    ]
    if len(named) > 1:
        raise NotConvertible(
            f"{ref.label} asks for NPUs of {len(named)} chips"
            f" ({', '.join(c.common_word for c in named)}); legacy HAMi gives a container one"
            " chip: keep one",
            code=422,
            reason="several-npu-chips",
        )
    return named[0]


def _mib(value: str) -> int | None:
    try:
        return -(-int(parse_quantity(value)) // MIB)
    except (QuantityError, ValueError):
        return None


PROFILE = AscendProfile()
