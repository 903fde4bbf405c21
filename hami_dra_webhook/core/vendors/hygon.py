"""Hygon DCU/HCU (docs/vendor-facts.md: Hygon): legacy `hygon.com/dcu*|hcu*` to the vendor's driver
`dra.hygon.com`, exactly.

- count only: no capacity at all (the driver's whole-card pass-through; legacy exclusive).
- memory MiB x memoryFactor -> `memory` bytes; absent -> all of it (legacy 100 %).
- cores are a percentage in legacy and absolute compute units (CU) in DRA: one `firstAvailable`
  alternative per CU count the cluster's cards have, pinned by `cores` capacity, each with its
  own ceil(p x CU / 100). 100 (or absent) -> omitted (the driver's default is all CUs); 0 -> 0.
- n cards: n requests of one device, distinct by `uuid`.
- UUID and type annotations: legacy values carry `HCU-`/`DCU-` prefixes, DRA's are bare.
"""

from __future__ import annotations

from typing import Any

from hami_dra_webhook.core.legacy.annotations import annotation_items, literal_list
from hami_dra_webhook.core.legacy.request import (
    MAX_CLAIM_DEVICES,
    MAX_MEMORY_MIB,
    LegacyRequest,
    read_vendor_request,
)
from hami_dra_webhook.core.legacy.selectors import ascii_upper
from hami_dra_webhook.core.model import cel
from hami_dra_webhook.core.model.quantity import format_mib
from hami_dra_webhook.core.model.types import Attention, ContainerRef, JsonObject, NotConvertible
from hami_dra_webhook.core.outcome.ask import Alternative, DeviceAsk
from hami_dra_webhook.core.outcome.decision import ContainerPlan
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.settings.vendor_config import (
    MAX_CU_ALTERNATIVES,
    HamiVendorSections,
    HygonSettings,
)
from hami_dra_webhook.core.vendors.profile import (
    Family,
    ProfileDefaults,
    Resolved,
    SliceFacts,
    distinct_capacities,
    legacy_values,
    requests_only,
)
from hami_dra_webhook.core.vendors.quota_group import DeviceHold, QuotaGroup

FAMILY = "hygon"
DEVICE_TYPE = "hcu"
COUNT_NAMES = ("hygon.com/dcunum", "hygon.com/hcunum")
MEMORY_NAMES = ("hygon.com/dcumem", "hygon.com/hcumem")
CORE_NAMES = ("hygon.com/dcucores", "hygon.com/hcucores")
USE_UUID = "hygon.com/use-gpuuuid"
NOUSE_UUID = "hygon.com/nouse-gpuuuid"
USE_TYPES = ("hygon.com/use-dcutype", "hygon.com/use-hcutype")
NOUSE_TYPES = ("hygon.com/nouse-dcutype", "hygon.com/nouse-hcutype")
_ID_PREFIXES = ("HCU-", "DCU-")


def role_names(sections: HamiVendorSections) -> tuple[tuple[str, ...], ...]:
    """(count names, memory names, core names): both spellings and the configured names."""
    names = sections.hygon
    return (
        tuple(dict.fromkeys((names.resource_count_name, *COUNT_NAMES))),
        tuple(dict.fromkeys((names.resource_memory_name, *MEMORY_NAMES))),
        tuple(dict.fromkeys((names.resource_core_name, *CORE_NAMES))),
    )


def _check_bounds(count: int, memory_mib: int | None, ref: ContainerRef) -> None:
    if count > MAX_CLAIM_DEVICES:
        raise NotConvertible(
            f"{ref.label}: {count} Hygon cards are more than the {MAX_CLAIM_DEVICES} devices a"
            f" DRA claim can hold; request at most {MAX_CLAIM_DEVICES}",
            code=422,
            reason="too-many-devices",
        )
    if memory_mib is not None and memory_mib > MAX_MEMORY_MIB:
        raise NotConvertible(
            f"{ref.label}: {memory_mib} MiB of Hygon memory is more than a Kubernetes quantity"
            " holds; no card could ever be allocated",
            code=422,
            reason="memory-too-large",
        )


def device_ask(
    request: LegacyRequest,
    ref: ContainerRef,
    annotations: dict[str, Any],
    sections: HamiVendorSections,
    settings: HygonSettings,
    warnings: list[str],
) -> DeviceAsk | None:
    count = request.count
    if count is None:
        warnings.append(
            Attention(
                f"{ref.label}: Hygon memory or cores without a card count: legacy HAMi ignored"
                " them too; removed, the container gets no card"
            )
        )
        return None
    if count == 0:
        return None
    driver = settings.driver_name
    memory_mib = request.memory * sections.hygon.memory_factor if request.memory else None
    _check_bounds(count, memory_mib, ref)
    cores = 100 if request.cores is None else request.cores
    if cores > 100:
        warnings.append(f"{ref.label}: Hygon cores {cores} clamped to 100 (as legacy HAMi v2.10)")
        cores = 100
    selectors = (
        cel.driver_device_of_type(driver, "type", DEVICE_TYPE),
        *_selectors(annotations, driver, warnings),
    )
    memory = (("memory", format_mib(memory_mib)),) if memory_mib is not None else ()
    whole = memory_mib is None and cores == 100
    alternatives: tuple[Alternative, ...]
    if whole or cores in (0, 100):
        core_capacity = (("cores", "0"),) if cores == 0 else ()
        # count only: no capacity at all, so the driver passes the whole card through
        alternatives = (Alternative(selectors, core_capacity + memory),)
    else:
        alternatives = _per_card_model(cores, selectors, memory, ref, settings)
    return DeviceAsk(
        family=FAMILY,
        device_class=settings.device_class_name,
        request_name=DEVICE_TYPE,
        count=count,
        alternatives=alternatives,
        distinct_attribute=f"{driver}/uuid",
        summary=_summary(count, memory_mib, cores),
        whole=whole,
    )


def _per_card_model(
    cores: int,
    selectors: tuple[str, ...],
    memory: tuple[tuple[str, str], ...],
    ref: ContainerRef,
    settings: HygonSettings,
) -> tuple[Alternative, ...]:
    units = settings.compute_units
    if not units:
        raise NotConvertible(
            f"{ref.label}: Hygon cores {cores}% needs the compute units of the cluster's Hygon"
            f" cards (DRA counts units, not percent): the webhook reads them from"
            f" {settings.driver_name}'s ResourceSlices, none seen; or set"
            " hamiDraWebhook.vendors.hygon.computeUnits (e.g. [120])",
            code=422,
            reason="no-compute-units",
        )
    alternatives = []
    for unit in units:
        pinned = (*selectors, cel.capacity_equals(settings.driver_name, "cores", str(unit)))
        wanted = -(-cores * unit // 100)  # ceil: at least the share legacy gave
        alternatives.append(Alternative(pinned, (("cores", str(wanted)), *memory), f"cu-{unit}"))
    if len(alternatives) == 1:
        only = alternatives[0]
        return (Alternative(only.selectors, only.capacity),)
    return tuple(alternatives)


def _selectors(annotations: dict[str, Any], driver: str, warnings: list[str]) -> list[str]:
    selectors: list[str] = []
    uuid = cel.attribute(driver, "uuid")
    for key, negated in ((USE_UUID, False), (NOUSE_UUID, True)):
        items = annotation_items(annotations, key, warnings)
        if items:
            bare = [_bare_id(item) for item in items]
            expression = f"{uuid} in {literal_list(key, bare)}"
            selectors.append(cel.negate(expression) if negated else expression)
    # Legacy matched upper("HCU-" + type) containing each upper(item); v2.10-era items name the
    # older plugin's "DCU-" types, whose "DCU-" is stripped so that "DCU-K100_AI" still matches.
    legacy_type = f'("HCU-" + {cel.attribute(driver, "productName")}).upperAscii()'
    for keys, negated in ((USE_TYPES, False), (NOUSE_TYPES, True)):
        for key in keys:
            items = annotation_items(annotations, key, warnings)
            if items:
                fragments = [ascii_upper(_strip_dcu(item)) for item in items]
                listed = literal_list(key, fragments)
                expression = f"{listed}.exists(f, {legacy_type}.contains(f))"
                selectors.append(cel.negate(expression) if negated else expression)
    return selectors


def _bare_id(item: str) -> str:
    """A legacy card ID is `HCU-<serial>` (or `DCU-<serial>` for the older plugin); the DRA
    driver's `uuid` is the bare serial."""
    for prefix in _ID_PREFIXES:
        if item.upper().startswith(prefix):
            return item[len(prefix) :]
    return item


def _strip_dcu(item: str) -> str:
    return item[4:] if item.upper().startswith("DCU-") else item


def _summary(count: int, memory_mib: int | None, cores: int) -> str:
    cards = "1 Hygon card" if count == 1 else f"{count} different Hygon cards"
    memory = "the whole memory" if memory_mib is None else f"{memory_mib} MiB"
    compute = {100: "all compute units", 0: "no compute-unit share (the driver gives 1 CU)"}.get(
        cores, f"{cores}% of its compute units"
    )
    return f"{cards}, {memory}, {compute}"


class HygonProfile(ProfileDefaults):
    key = FAMILY

    def family(self, policy: Policy) -> Family:
        settings = policy.webhook.vendors.hygon
        return Family(
            FAMILY,
            "Hygon DCU/HCU",
            tuple(n for names in role_names(policy.hami_vendors) for n in names),
            settings.convert,
            settings.driver_name,
            settings.device_class_name,
            cel.driver_device_of_type(settings.driver_name, "type", DEVICE_TYPE),
            "hamiDraWebhook.vendors.hygon.convert: true",
            node_label=("hcu", "on"),
        )

    def resolve(
        self,
        ref: ContainerRef,
        container: Any,
        annotations: dict[str, Any],
        policy: Policy,
        warnings: list[str],
    ) -> Resolved:
        sections = policy.hami_vendors
        request = read_vendor_request(container, ref, *role_names(sections))
        requests_only(request, ref, warnings)
        settings = policy.webhook.vendors.hygon
        ask = device_ask(request, ref, annotations, sections, settings, warnings)
        plan = ContainerPlan(ref, request, ask, FAMILY)
        return (plan, legacy_values(container, request), "")

    def facts_driver(self, policy: Policy) -> str | None:
        settings = policy.webhook.vendors.hygon
        return settings.driver_name if settings.convert else None

    def read_facts(self, slices: list[JsonObject], policy: Policy) -> SliceFacts:
        """The distinct `cores` capacities (compute units per card) of the driver's devices,
        largest first: one firstAvailable alternative each (`device_ask`)."""
        driver = policy.webhook.vendors.hygon.driver_name
        devices = (
            device
            for resource_slice in slices
            if (spec := resource_slice.get("spec") or {}).get("driver") == driver
            for device in spec.get("devices") or []
        )
        return distinct_capacities(devices, "cores", int, "Hygon compute-unit count")

    def with_facts(self, policy: Policy, values: tuple[int, ...]) -> Policy:
        web = policy.webhook
        hygon = web.vendors.hygon
        units = values[:MAX_CU_ALTERNATIVES] or hygon.compute_units
        if units == hygon.compute_units:
            return policy
        vendors = web.vendors.model_copy(
            update={"hygon": hygon.model_copy(update={"compute_units": units})}
        )
        return policy.with_webhook(web.model_copy(update={"vendors": vendors}))

    def quota_groups(self, policy: Policy) -> tuple[QuotaGroup, ...]:
        """HAMi's Hygon quota (`pkg/device/hygon/device.go`): memory MiB x memoryFactor, cores
        percent. Its driver counts compute units: a claim's are charged as the percent of its
        card; the cards' memory only the driver's slices say."""
        settings, sections = policy.webhook.vendors.hygon, policy.hami_vendors
        if not settings.convert:
            return ()
        counts, memories, cores = role_names(sections)
        group = QuotaGroup(
            FAMILY,
            counts,
            memories,
            cores,
            sections.hygon.memory_factor,
            driver=settings.driver_name,
            device_class=settings.device_class_name,
            cores_in_units=True,
            sized_by_slices=True,
        )
        return (group,)

    def held(self, group: QuotaGroup, plan: ContainerPlan) -> DeviceHold:
        """Memory absent: the whole card's; cores absent: 100 (clamped to 100)."""
        request, ask = plan.request, plan.ask
        memory = request.memory * group.memory_factor if request.memory else None
        cores = 100 if request.cores is None else request.cores
        return DeviceHold(ask.count if ask else 0, memory, None, cores)


PROFILE = HygonProfile()
