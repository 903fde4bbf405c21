"""The device groups GPU quotas are kept for, one per device kind a quota key names: NVIDIA,
Hygon, each Ascend chip (HAMi names every chip's resources apart), AMD, AWS Neuron; what one
container with legacy resources holds in its group; and which group a claim's request is of.
Rules and sources: docs/quotas.md ("Other vendors"). No I/O.

HAMi v2.10 keeps a quota on `limits.<memory name>` and `limits.<core name>` of every device
(`pkg/device/quota.go`; its webhook checks every device's request, `fitResourceQuota`):
- Hygon: memory MiB x memoryFactor, absent = the whole card's; cores percent, absent = 100,
  clamped to 100 (`pkg/device/hygon/device.go`). Its DRA driver counts absolute compute units
  (CU), so a claim's CU are turned back into the least percent that asks for them on its card.
- Ascend: per chip; memory as asked (hami-core) or the vNPU template it is rounded to, absent or
  above the largest template = the chip's `memoryAllocatable`; cores percent, absent = 0
  (`pkg/device/ascend/device.go` `MutateAdmission`, `GenerateResourceRequests`, `Fit`).
- AMD (whole cards only here): the card's memory, cores 100 per card (`pkg/device/amd`).
- AWS Neuron: no memory; its `neuroncore` charge depends on the node's instance type, unknown
  before a node is chosen: that key is not kept (HAMi counts a core bit mask there).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hami_dra_webhook.core.model import cel
from hami_dra_webhook.core.model.quantity import MIB, QuantityError, parse_byte_size, parse_quantity
from hami_dra_webhook.core.outcome.decision import ContainerPlan
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.vendors import hygon

NVIDIA = "nvidia"
HYGON = "hygon"
AMD = "amd"
NEURON = "aws-neuron"
ASCEND_PREFIX = "ascend/"  # + the chip's commonWord: one group per chip


@dataclass(frozen=True, slots=True)
class Group:
    """The legacy resource names of one device kind, and which of HAMi's keys are kept."""

    key: str  # "nvidia", "hygon", "ascend/Ascend910B3", "amd", "aws-neuron"
    count: tuple[str, ...]
    memory: tuple[str, ...]
    cores: tuple[str, ...]
    memory_factor: int = 1  # HAMi scales the memory asked and the limit by it
    hami_memory: bool = True  # limits.<memory> kept
    hami_cores: bool = True  # limits.<cores> kept
    driver: str = ""  # its DRA driver and DeviceClass: a claim of them is of this group
    device_class: str = ""
    chip: str = ""  # Ascend: the chip's productName, which the webhook's claims pin


# Policies asked about (one or two a process), by identity: a claim's every request asks.
_KNOWN: dict[int, tuple[Policy, tuple[Group, ...]]] = {}


def groups(policy: Policy) -> tuple[Group, ...]:
    """Every group this policy converts."""
    found = _KNOWN.get(id(policy))
    if found is None or found[0] is not policy:
        if len(_KNOWN) >= 64:
            _KNOWN.clear()
        found = _KNOWN[id(policy)] = (policy, _groups(policy))
    return found[1]


def _groups(policy: Policy) -> tuple[Group, ...]:
    names, web = policy.legacy_resource_names, policy.webhook
    found = [
        Group(
            NVIDIA,
            _names(names.gpus),
            _names(names.memory),
            _names(names.cores),
            policy.nvidia.memory_factor,
            driver=web.driver_name,
            device_class=web.device_class_name,
        )
    ]
    vendors, sections = web.vendors, policy.hami_vendors
    if vendors.hygon.convert:
        counts, memories, cores = hygon.role_names(sections)
        found.append(
            Group(
                HYGON,
                counts,
                memories,
                cores,
                sections.hygon.memory_factor,
                driver=vendors.hygon.driver_name,
                device_class=vendors.hygon.device_class_name,
            )
        )
    if vendors.ascend.convert:
        found += [
            Group(
                ASCEND_PREFIX + chip.common_word,
                _names(chip.resource_name),
                _names(chip.resource_memory_name),
                _names(chip.resource_core_name),
                chip.memory_factor,
                driver=vendors.ascend.driver_name,
                device_class=vendors.ascend.device_class_name,
                chip=chip.chip_name,
            )
            for chip in sections.vnpus
        ]
    for key, section, settings, hami in (
        (AMD, sections.amd, vendors.amd, True),
        (NEURON, sections.awsneuron, vendors.aws_neuron, False),
    ):
        if settings.convert:
            found.append(
                Group(
                    key,
                    _names(section.resource_count_name),
                    _names(section.resource_memory_name),
                    _names(section.resource_core_name),
                    hami_memory=hami,
                    hami_cores=hami,
                    driver=settings.driver_name,
                    device_class=settings.device_class_name,
                )
            )
    return tuple(found)


def _names(*names: str | None) -> tuple[str, ...]:
    return tuple(n for n in names if n)


@dataclass(frozen=True, slots=True)
class Cards:
    """What is known of the devices a pod may land on: the largest memory (MiB) of each group
    (absent: unknown). A share whose memory
    depends on the device (a whole card, a percentage) is charged on the largest before it is
    allocated, so a held pod never goes over; once allocated, its consumed capacity is."""

    largest: Mapping[str, int] = field(default_factory=dict)

    def largest_mib(self, group: str) -> int:
        return self.largest.get(group, 0)


def cards_for(policy: Policy, vendor_memory: Mapping[str, int] | None = None) -> Cards:
    """The devices' sizes: NVIDIA's from its ResourceSlices or settings (the policy's), every
    Ascend chip's from HAMi's `vnpus` (`memoryAllocatable`), Hygon's and AMD's from their
    drivers' ResourceSlices (`vendor_memory`, by group; absent: unknown)."""
    largest = dict(vendor_memory or {})
    largest[NVIDIA] = policy.largest_memory_mib
    for chip in policy.hami_vendors.vnpus:
        largest[ASCEND_PREFIX + chip.common_word] = chip.memory_allocatable * chip.memory_factor
    return Cards(largest)


# The groups whose device memory only their drivers' ResourceSlices tell.
SIZED_BY_SLICES = (HYGON, AMD)


def largest_memory_mib(slices: Iterable[Any], driver: str) -> int:
    """The largest `memory` capacity (MiB, rounded down) the driver's devices publish; 0: none
    readable."""
    largest = 0
    for resource_slice in slices:
        spec = resource_slice.get("spec") if isinstance(resource_slice, dict) else None
        if not isinstance(spec, dict) or spec.get("driver") != driver:
            continue
        for device in spec.get("devices") or []:
            value = (((device or {}).get("capacity") or {}).get("memory") or {}).get("value")
            try:
                largest = max(largest, parse_byte_size(str(value)) // MIB)
            except (QuantityError, ValueError):
                continue
    return largest


@dataclass(frozen=True, slots=True)
class Use:
    """What one container with legacy resources holds, as HAMi counts it: `devices` devices of
    `group`, each with this memory (MiB; None: the whole device's), memory percentage and
    cores (percent of one device); and what it asked, as kube-apiserver counts it."""

    group: str
    devices: int
    memory_mib: int | None
    percentage: int | None
    cores: int
    asked: Mapping[str, int]  # "count", "memory", "cores": the values written


def container_use(planned: ContainerPlan, policy: Policy) -> Use | None:
    """The container's use, from the translation's plan of it (None: no group kept)."""
    request = planned.request
    asked = {
        "count": request.count or 0,
        "memory": request.memory or 0,
        "cores": request.cores or 0,
    }
    share, ask = planned.share, planned.ask
    if planned.family == NVIDIA or (ask is None and share is not None):
        if share is None:
            return Use(NVIDIA, 0, None, None, 0, asked)
        return Use(NVIDIA, share.count, share.memory_mib, share.percentage, share.cores, asked)
    group = _group_of(planned, policy)
    if group is None:
        return None
    if ask is None:
        return Use(group.key, 0, None, None, 0, asked)
    memory, cores = _legacy_share(group, planned, policy)
    return Use(group.key, ask.count, memory, None, min(cores, 100), asked)


def _group_of(planned: ContainerPlan, policy: Policy) -> Group | None:
    named = set(planned.request.in_limits) | set(planned.request.in_requests)
    for group in groups(policy):
        if named & {*group.count, *group.memory, *group.cores}:
            return group
    return None


def _legacy_share(group: Group, planned: ContainerPlan, policy: Policy) -> tuple[int | None, int]:
    """Per device: memory MiB (None: the whole device's) and cores percent, as HAMi charges."""
    request = planned.request
    if group.key == HYGON:
        memory = request.memory * group.memory_factor if request.memory else None
        return memory, 100 if request.cores is None else request.cores
    if group.key.startswith(ASCEND_PREFIX):
        # The memory legacy gave: as asked (hami-core) or its template (the plan's ask)
        asked = planned.ask.alternatives[0].capacity if planned.ask else ()
        memory = next((_mib(v) for k, v in asked if k == "memory"), None)
        return memory, request.cores or 0
    return None, 100  # AMD: whole cards


def _mib(value: str) -> int | None:
    try:
        return -(-int(parse_quantity(value)) // MIB)
    except (QuantityError, ValueError):
        return None


# What the webhook writes to pin a Hygon card model (core/vendors/hygon.py) and an Ascend chip
# (core/vendors/ascend.py). Only a selector that is exactly such a pin is read (selectors are
# ANDed, so it holds for the device allocated): a tenant's claim cannot be charged less by a pin
# inside a negation or an alternative.
_UNITS = re.compile(r'\.cores\.compareTo\(quantity\("(\d{1,6})"\)\) == 0$')


@dataclass(frozen=True, slots=True)
class Option:
    """One way a claim's request may be satisfied, as read for its charge: its groups (an
    Ascend request not pinned to a chip could land on any: charged to each), whether it asks
    cores at all, and the compute units of the Hygon card it is pinned to (0: not pinned)."""

    groups: tuple[str, ...]
    asks_cores: bool
    card_units: int


def option_of(exact: Mapping[str, Any], policy: Policy) -> Option | None:
    """What an `exactly` (or a `firstAvailable` subrequest) of a claim asks, when its
    DeviceClass is a kept group's; None otherwise."""
    device_class = exact.get("deviceClassName")
    of_class = [g for g in groups(policy) if g.device_class == device_class]
    if not of_class:
        return None
    expressions = {
        str(((s or {}).get("cel") or {}).get("expression", ""))
        for s in exact.get("selectors") or []
        if isinstance(s, dict)
    }
    pinned = [g for g in of_class if g.chip and _pins_chip(expressions, g)]
    capacity = (exact.get("capacity") or {}).get("requests") or {}
    units = 0
    for expression in expressions:
        found = _UNITS.search(expression)
        driver = of_class[0].driver
        if found and expression == cel.capacity_equals(driver, "cores", found.group(1)):
            units = int(found.group(1))
    chosen = pinned or of_class
    return Option(tuple(g.key for g in chosen), "cores" in capacity, units)


def _pins_chip(expressions: set[str], group: Group) -> bool:
    pin = f"{cel.attribute(group.driver, 'productName')} == {cel.string_literal(group.chip)}"
    return pin in expressions


def group_by_driver(driver: str, policy: Policy) -> tuple[str, ...]:
    """The groups of an allocation result's driver (every Ascend chip for Ascend's)."""
    return tuple(g.key for g in groups(policy) if g.driver == driver)


def percent_of_units(units: int, card_units: int) -> int:
    """Hygon: the largest percent whose conversion (ceil(p x CU / 100), core/vendors/hygon.py)
    asks `units` compute units of a card of `card_units`. On cards of 100 CU or more every
    percent asks a different number of units, so this is the percent legacy asked, exactly;
    below 100 CU, neighbouring percents ask the same units and the largest is charged (never
    less than HAMi charged). A unit or more is at least 1 percent."""
    if units <= 0:
        return 0
    if card_units <= 0:
        return 100  # the card is not known: its share is not (charged as a whole card's)
    return min(100, max(1, units * 100 // card_units))
