"""What a pod holding the drivers' devices through DRA is charged against the kept quota keys:
its ResourceClaims of a kept group's DeviceClass (converted pods, a tenant's own claims, the
claims kube-scheduler makes for extended resources), and, before kube-scheduler has made that
claim, the implicit extended resource of such a class (`deviceclass.resource.kubernetes.io/
<class>`, KEP-5004). Rules and sources: docs/quotas.md. No I/O.

A claim is written by a tenant: it is hostile input. Nothing is expanded by a count it gives
(a request's count is a multiplier, never a list), no request counts for more devices than a
claim can hold (32), and what a request could take at most is charged before it is allocated:
`allocationMode: All` is every device of its group that one node publishes (unknown, so
nothing fits beside it, where no slice says), a `firstAvailable` its largest way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from hami_dra_webhook.core.model.quantity import MIB, QuantityError, parse_quantity
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.quota.gpu_quota import Charge, KeyRule, share_amount
from hami_dra_webhook.core.quota.quota_groups import (
    NVIDIA,
    Cards,
    Option,
    group_by_driver,
    group_named,
    groups,
    option_of,
    percent_of_units,
)
from hami_dra_webhook.core.settings.policy import Policy

# resource.k8s.io/v1's own limits (kube-apiserver validates them; a claim read back from it
# is within them, but nothing here relies on that).
MAX_CLAIM_DEVICES = 32  # a claim holds at most 32 devices
MAX_REQUESTS = 32
MAX_SUBREQUESTS = 8
# Every DeviceClass's implicit extended resource (KEP-5004, DRAExtendedResource): a pod asking
# `deviceclass.resource.kubernetes.io/<class>: N` gets N whole devices of the class from
# kube-scheduler, in a claim it makes at scheduling.
IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"


@dataclass(frozen=True, slots=True)
class Device:
    """`count` devices alike that a claim's request asks for or holds, of a kept group's
    DeviceClass or driver: their groups (an Ascend device not pinned to a chip: every chip's),
    memory (MiB, None when the whole device's) and cores (percent of one device). `count`
    None: as many as a node has, and no node's number is known."""

    request: str
    groups: tuple[str, ...]
    memory_mib: int | None
    cores: int
    count: int | None = 1


def claim_devices(claim: JsonObject, policy: Policy, cards: Cards) -> list[Device]:
    """The devices of the kept groups the claim holds (from its allocation) or asks for (from
    its spec, the largest alternative of a `firstAvailable`)."""
    options = _options(claim, policy)
    drivers = {g.driver for g in groups(policy)}
    results = ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
    listed = results.get("results") if isinstance(results, dict) else None
    held = [
        r
        for r in (listed if isinstance(listed, list) else [])
        if isinstance(r, dict) and r.get("driver") in drivers
    ]
    if held:
        devices = []
        for result in held:
            request, _, sub = str(result.get("request", "")).partition("/")
            found = options.get(request, {}).get(sub)
            option = (
                found[0] if found else Option(group_by_driver(result["driver"], policy), True, 0)
            )
            devices.append(_device(request, result.get("consumedCapacity"), option, policy))
        return devices
    devices = []
    for name, alternatives in options.items():
        asked = [
            _asked(exact, name, option, policy, cards) for option, exact in alternatives.values()
        ]
        devices.append(max(asked, key=_size))
    return devices


def _options(claim: JsonObject, policy: Policy) -> dict[str, dict[str, tuple[Option, JsonObject]]]:
    """Each request's ways (subrequest name, "" for `exactly`) that ask a kept group's class."""
    found: dict[str, dict[str, tuple[Option, JsonObject]]] = {}
    requests = (((claim.get("spec") or {}).get("devices") or {}).get("requests")) or []
    for request in requests[:MAX_REQUESTS] if isinstance(requests, list) else []:
        if not isinstance(request, dict):
            continue
        ways = [("", request["exactly"])] if isinstance(request.get("exactly"), dict) else []
        subrequests = request.get("firstAvailable")
        ways += [
            (str(o.get("name", "")), o)
            for o in (subrequests[:MAX_SUBREQUESTS] if isinstance(subrequests, list) else [])
            if isinstance(o, dict)
        ]
        for sub, exact in ways:
            option = option_of(exact, policy)
            if option is not None:
                found.setdefault(str(request.get("name", "")), {})[sub] = (option, exact)
    return found


def _asked(exact: JsonObject, name: str, option: Option, policy: Policy, cards: Cards) -> Device:
    count: int | None
    if exact.get("allocationMode") == "All":
        most = max((cards.most_per_node(g) for g in option.groups), default=0)
        count = min(most, MAX_CLAIM_DEVICES) or None
    else:
        asked = exact.get("count", 1)
        count = asked if isinstance(asked, int) and asked > 0 else 1
        count = min(count, MAX_CLAIM_DEVICES)
    capacity = (exact.get("capacity") or {}).get("requests") or {}
    one = _device(name, capacity, option, policy)
    return Device(one.request, one.groups, one.memory_mib, one.cores, count)


def _device(request: str, capacity: Any, option: Option, policy: Policy) -> Device:
    """A device's charge from the capacity it asks or consumed, as its group counts it."""
    capacity = capacity if isinstance(capacity, dict) else {}
    group = group_named(option.groups[0] if option.groups else NVIDIA, policy)
    if group is None:
        return Device(request, option.groups, None, 100)
    if group.whole_cores is not None:  # allocated whole
        return Device(request, option.groups, None, group.whole_cores)
    memory = _amount(capacity.get(group.memory_capacity), MIB)
    cores = _amount(capacity.get(group.cores_capacity), 1)
    if group.cores_in_units and cores is not None:
        cores = percent_of_units(cores, option.card_units)
    return Device(request, option.groups, memory, 100 if cores is None else min(cores, 100))


def _amount(value: Any, unit: int) -> int | None:
    if value is None:
        return None
    try:
        return math.ceil(parse_quantity(str(value)) / Fraction(unit))
    except (QuantityError, ValueError):
        return None


def _size(device: Device) -> tuple[int, int, int]:
    count = MAX_CLAIM_DEVICES if device.count is None else device.count
    whole = 2**40  # more MiB than any card: a whole card's memory outweighs any share
    memory = whole if device.memory_mib is None else device.memory_mib
    return (count, memory * count, device.cores * count)


def implicit_devices(container: Any, policy: Policy) -> list[Device]:
    """The whole devices a container asks through the implicit extended resource of a kept
    group's DeviceClass (kube-scheduler makes its claim only at scheduling)."""
    resources = container.get("resources") if isinstance(container, dict) else None
    if not isinstance(resources, dict):
        return []
    asked: dict[str, int] = {}
    for field_name in ("requests", "limits"):  # kube-apiserver holds the two equal
        values = resources.get(field_name)
        for name, value in values.items() if isinstance(values, dict) else ():
            if isinstance(name, str) and name.startswith(IMPLICIT_PREFIX):
                asked.setdefault(name[len(IMPLICIT_PREFIX) :], _whole_count(value))
    devices = []
    for device_class, count in asked.items():
        of_class = tuple(g.key for g in groups(policy) if g.device_class == device_class)
        if of_class and count:
            option = Option(of_class, False, 0)
            one = _device(f"{IMPLICIT_PREFIX}{device_class}", {}, option, policy)
            devices.append(Device(one.request, of_class, None, one.cores, count))
    return devices


def _whole_count(value: Any) -> int:
    """An extended resource's count, bounded by what one claim can hold."""
    try:
        return min(max(math.ceil(parse_quantity(str(value))), 0), MAX_CLAIM_DEVICES)
    except (QuantityError, ValueError, ZeroDivisionError):
        return MAX_CLAIM_DEVICES  # kube-apiserver takes only integers: charged the most


def devices_charge(devices: Iterable[Device], keys: Mapping[str, KeyRule], cards: Cards) -> Charge:
    """What the devices are charged: HAMi's keys per device; kube-apiserver's keys once per
    request (its per-device value, as a container's request was), its count per device."""
    listed = list(devices)
    first_of: dict[str, Device] = {}
    for device in listed:
        first_of.setdefault(device.request, device)
    charge = Charge()
    for key, rule in keys.items():
        per_device = rule.form == "hami" or rule.dimension == "count"
        for device in listed if per_device else list(first_of.values()):
            if rule.group not in device.groups:
                continue
            amount = share_amount(device.memory_mib, None, device.cores, rule, cards)
            if amount is None or (per_device and device.count is None):
                charge.unknown.add(key)
                continue
            times = (device.count or 0) if per_device else 1
            charge.amounts[key] = charge.amounts.get(key, 0) + amount * times
    return charge


def claims_charge(
    claims: Iterable[JsonObject], policy: Policy, keys: Mapping[str, KeyRule], cards: Cards
) -> Charge:
    """What the claims' devices are charged, each claim once."""
    charge = Charge()
    for claim in claims:
        charge.add(devices_charge(claim_devices(claim, policy, cards), keys, cards))
    return charge
