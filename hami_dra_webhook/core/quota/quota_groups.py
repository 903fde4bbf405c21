"""The device groups GPU quotas are kept for, one per device kind a quota key names (NVIDIA,
Hygon, each Ascend chip, AMD, AWS Neuron: each family's profile says its own, with how HAMi
counts it; core/vendors/quota_group.py); what one container with legacy resources holds in its
group; and which group a claim's request is of. Rules and sources: docs/quotas.md ("Other
vendors"). No I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hami_dra_webhook.core.model import cel
from hami_dra_webhook.core.model.quantity import MIB, QuantityError, parse_byte_size
from hami_dra_webhook.core.model.slice_view import SliceView
from hami_dra_webhook.core.outcome.decision import ContainerPlan
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.vendors import nvidia
from hami_dra_webhook.core.vendors.families import BY_KEY, PROFILES
from hami_dra_webhook.core.vendors.quota_group import QuotaGroup

NVIDIA = nvidia.FAMILY  # the group of a device no other group claims
Group = QuotaGroup


# Policies asked about (one or two a process), by identity: a claim's every request asks.
_KNOWN: dict[int, tuple[Policy, tuple[Group, ...]]] = {}


def groups(policy: Policy) -> tuple[Group, ...]:
    """Every group this policy converts, each family's profile's (core/vendors/)."""
    found = _KNOWN.get(id(policy))
    if found is None or found[0] is not policy:
        if len(_KNOWN) >= 64:
            _KNOWN.clear()
        kept = tuple(group for profile in PROFILES for group in profile.quota_groups(policy))
        found = _KNOWN[id(policy)] = (policy, kept)
    return found[1]


def group_named(key: str, policy: Policy) -> Group | None:
    return next((group for group in groups(policy) if group.key == key), None)


@dataclass(frozen=True, slots=True)
class Cards:
    """What is known of the devices a pod may land on: the largest memory (MiB) of each group
    (absent: unknown). A share whose memory
    depends on the device (a whole card, a percentage) is charged on the largest before it is
    allocated, so a held pod never goes over; once allocated, its consumed capacity is."""

    largest: Mapping[str, int] = field(default_factory=dict)
    # The most devices of each group that one node publishes (absent: unknown): what a request
    # with `allocationMode: All` can take at most before it is allocated.
    per_node: Mapping[str, int] = field(default_factory=dict)

    def largest_mib(self, group: str) -> int:
        return self.largest.get(group, 0)

    def most_per_node(self, group: str) -> int:
        return self.per_node.get(group, 0)


def cards_for(
    policy: Policy,
    vendor_memory: Mapping[str, int] | None = None,
    per_node: Mapping[str, int] | None = None,
) -> Cards:
    """The devices' sizes: what the settings say (NVIDIA's from its ResourceSlices or settings,
    every Ascend chip's `memoryAllocatable`), and what the drivers' ResourceSlices say of the
    groups `sized_by_slices` (`vendor_memory`, by group; absent: unknown); `per_node`: the most
    devices of each group on one node, from the same slices."""
    largest = dict(vendor_memory or {})
    largest.update({g.key: g.largest_mib for g in groups(policy) if not g.sized_by_slices})
    return Cards(largest, dict(per_node or {}))


def most_devices_per_node(slices: Iterable[Any], driver: str) -> int:
    """The most devices the driver publishes for one node (or one pool, where a slice names no
    node); 0: none."""
    counted: dict[str, int] = {}
    for view in map(SliceView.of, slices):
        if view.driver == driver:
            where = view.node_name or view.pool_name
            counted[where] = counted.get(where, 0) + len(view.devices)
    return max(counted.values(), default=0)


def largest_memory_mib(slices: Iterable[Any], driver: str) -> int:
    """The largest `memory` capacity (MiB, rounded down) the driver's devices publish; 0: none
    readable."""
    largest = 0
    for view in map(SliceView.of, slices):
        if view.driver != driver:
            continue
        for device in view.devices:
            try:
                largest = max(largest, parse_byte_size(device.capacity.get("memory", "")) // MIB)
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
    """The container's use, from the translation's plan of it and its family's profile (None:
    no group kept)."""
    request = planned.request
    asked = {
        "count": request.count or 0,
        "memory": request.memory or 0,
        "cores": request.cores or 0,
    }
    profile = BY_KEY[planned.family]
    group = _group_of(planned, profile.quota_groups(policy))
    if group is None:
        return None
    if not planned.gets_devices:
        return Use(group.key, 0, None, None, 0, asked)
    held = profile.held(group, planned)
    return Use(
        group.key, held.devices, held.memory_mib, held.percentage, min(held.cores, 100), asked
    )


def _group_of(planned: ContainerPlan, kept: tuple[Group, ...]) -> Group | None:
    """The family's one group, or the one whose names the container asks (an Ascend chip)."""
    if len(kept) == 1:
        return kept[0]
    named = set(planned.request.in_limits) | set(planned.request.in_requests)
    return next((g for g in kept if named & {*g.count, *g.memory, *g.cores}), None)


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
