"""GPU memory and cores quotas: which ResourceQuota keys hold converted pods, what each pod is
charged against them, and whether a held pod fits. Rules and sources: docs/quotas.md. No I/O.

Two kinds of keys are kept, each with the meaning it had before conversion:
- HAMi's (`limits.<memory>` and `limits.<cores>` of NVIDIA): per device, times the devices
  (`gpu: 2, gpumem: 3000` charges 6000), enforced by hami-scheduler.
- kube-apiserver's (`requests.<count>`, `requests.<memory>`, `requests.<cores>`): the value a
  container asked for, not multiplied by its devices.

A pod is charged from what it holds: a pod with legacy resources by legacy's own rules (the
translation's plan of it), a pod with claims by the claims themselves (what DRA allocates; a
tenant can forge a label or an annotation, not what the scheduler allocates), each claim once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any, Literal

from hami_dra_webhook.core.model.quantity import MIB, QuantityError, parse_quantity
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.outcome.decision import Converted
from hami_dra_webhook.core.quota.quota_groups import (
    NVIDIA,
    Cards,
    Option,
    container_use,
    group_by_driver,
    group_named,
    groups,
    option_of,
    percent_of_units,
)
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.translate.pod import translate_pod
from hami_dra_webhook.core.vendors.families import converted_names

# The scheduling gate that holds a GPU pod of a namespace with such a quota until it is counted.
GATE = "hami.io/gpu-quota"
# On a pod created held (with the gate): lets the quota pass find held pods with one labelled
# list instead of reading every pod of every quota namespace. Only a hint (a tenant can remove
# it: the pass also reads every quota namespace whole every `resync` seconds).
HELD_LABEL = "hami.io/gpu-quota"
HELD_LABEL_VALUE = "held"
# On a Namespace whose quotas name such a key (set by the webhook): pods there get the gate.
NAMESPACE_LABEL = "hami.io/gpu-quota"
NAMESPACE_LABEL_VALUE = "enforced"

Dimension = Literal["count", "memory", "cores"]
Form = Literal["hami", "native"]


QUOTA_PREFIXES = ("requests.", "limits.")


def bare_quota_key(key: str) -> str:
    """`requests.nvidia.com/gpu` -> `nvidia.com/gpu` (a queue's names have no prefix)."""
    for prefix in QUOTA_PREFIXES:
        if key.startswith(prefix):
            return key[len(prefix) :]
    return key


def counts_converted(key: object, policy: Policy) -> bool:
    """Whether a quota's or a queue's entry `key` counts a resource this policy converts: the
    one rule for every quota judgement (`scan`, `check`, `convert`, `dry-run`). Only the names
    the policy converts count, and the totals Kueue derives from them (`nvidia.com/total-gpumem`
    of Kueue's HAMi example: a resourceTransformation of gpumem times gpu). Under a renamed count
    resource (`nvidia.com/gpualloc`), `nvidia.com/gpu` belongs to NVIDIA's own device plugin,
    whose pods are never converted: a quota on it keeps limiting what it limited."""
    return isinstance(key, str) and bare_quota_key(key) in _counted_names(policy)


@lru_cache(maxsize=16)
def _counted_names(policy: Policy) -> frozenset[str]:
    names = converted_names(policy)
    totals = {f"{domain}/total-{name}" for domain, _, name in (n.partition("/") for n in names)}
    return frozenset((*names, *totals))


@dataclass(frozen=True, slots=True)
class KeyRule:
    dimension: Dimension
    form: Form  # hami: per device times devices; native: per container, not multiplied
    group: str = NVIDIA  # the devices it charges (core/quota/quota_groups.py)
    memory_factor: int = 1  # hami memory keys: HAMi scales the limit as the memory asked


def quota_keys(policy: Policy) -> dict[str, KeyRule]:
    """Every ResourceQuota key this webhook keeps, with how a pod is charged against it."""
    keys: dict[str, KeyRule] = {}
    for group in groups(policy):
        for name in group.memory:
            if group.hami_memory:
                keys[f"limits.{name}"] = KeyRule("memory", "hami", group.key, group.memory_factor)
            keys[f"requests.{name}"] = KeyRule("memory", "native", group.key)
        for name in group.cores:
            if group.hami_cores:
                keys[f"limits.{name}"] = KeyRule("cores", "hami", group.key)
            keys[f"requests.{name}"] = KeyRule("cores", "native", group.key)
        for name in group.count:
            keys[f"requests.{name}"] = KeyRule("count", "native", group.key)
    return keys


@dataclass(frozen=True, slots=True)
class Limit:
    quota: str  # the ResourceQuota's name
    key: str
    hard: int


def limits_of(quotas: Iterable[Any], keys: Mapping[str, KeyRule]) -> list[Limit]:
    """The limits of a namespace's ResourceQuotas on the kept keys (each quota's own: all hold,
    as kube-apiserver holds every quota). A value is read as a whole number (`8k` = 8000 MiB, as
    HAMi's AsInt64 reads it; a fraction rounds up); one that is not a quantity is skipped (kube-
    apiserver validates them, so none is stored). HAMi scales its memory limits by
    `memoryFactor`, as it scales the memory asked."""
    found = []
    for quota in quotas:
        if not isinstance(quota, dict):
            continue
        name = str((quota.get("metadata") or {}).get("name", ""))
        hard = (quota.get("spec") or {}).get("hard")
        for key, value in hard.items() if isinstance(hard, dict) else ():
            if key in keys:
                amount, rule = _whole(value), keys[key]
                if amount is not None and (rule.dimension, rule.form) == ("memory", "hami"):
                    amount *= rule.memory_factor
                if amount is not None:
                    found.append(Limit(name, key, amount))
    return found


def _whole(value: Any) -> int | None:
    try:
        return math.ceil(parse_quantity(str(value)))
    except (QuantityError, ValueError, ZeroDivisionError):
        return None


@dataclass
class Charge:
    """What a pod (or a namespace) is charged, by key; `unknown`: keys whose amount cannot be
    known yet (a whole card's memory where no card size is known): such a pod never fits a
    limit on them."""

    amounts: dict[str, int] = field(default_factory=dict)
    unknown: set[str] = field(default_factory=set)

    def add(self, other: Charge) -> None:
        for key, amount in other.amounts.items():
            self.amounts[key] = self.amounts.get(key, 0) + amount
        self.unknown |= other.unknown

    def of(self, key: str) -> int:
        return self.amounts.get(key, 0)

    def words(self) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(self.amounts.items()) if v) or "nothing"


def legacy_charge(
    pod: JsonObject, policy: Policy, keys: Mapping[str, KeyRule], cards: Cards
) -> Charge:
    """What a pod with legacy resources is charged: HAMi's keys as HAMi counts the devices it
    gives (per device times devices; init containers as max(sum of the app containers, largest
    init container)), kube-apiserver's keys as its quota counts requests (per container, init
    containers the same way)."""
    charge = Charge()
    decision = translate_pod(pod, policy)
    if not isinstance(decision, Converted):
        # Not readable as legacy HAMi reads it here (a percentage with no card size known, a
        # value this project refuses): unknown, so nothing that asks these keys fits beside it.
        charge.unknown = set(keys)
        return charge
    apps, inits = Charge(), []
    for planned in decision.plan:
        use = container_use(planned, policy)
        if use is None:
            continue
        one = Charge()
        for key, rule in keys.items():
            if rule.group != use.group:
                continue
            if rule.form == "native":
                one.amounts[key] = use.asked[rule.dimension]
                continue
            per_device = _share_amount(use.memory_mib, use.percentage, use.cores, rule, cards)
            if per_device is None:
                one.unknown.add(key)
            else:
                one.amounts[key] = per_device * use.devices
        if planned.ref.list_name == "initContainers":
            inits.append(one)
        else:
            apps.add(one)
    charge.unknown = apps.unknown | {k for one in inits for k in one.unknown}
    for key in keys:
        charge.amounts[key] = max([apps.of(key), *(one.of(key) for one in inits)])
    return charge


def _share_amount(
    memory_mib: int | None, percentage: int | None, cores: int, rule: KeyRule, cards: Cards
) -> int | None:
    if rule.dimension == "cores":
        return min(cores, 100)
    if rule.dimension == "count":
        return 1
    if memory_mib is not None:
        return memory_mib
    largest = cards.largest_mib(rule.group)
    if not largest:
        return None
    if percentage is not None:
        return largest * percentage // 100
    return largest


@dataclass(frozen=True, slots=True)
class Device:
    """One device a claim asks for or holds, of a kept group's DeviceClass or driver: its
    groups (an Ascend device not pinned to a chip: every chip's), its memory (MiB, None when
    the whole device's) and cores (percent of one device)."""

    request: str
    groups: tuple[str, ...]
    memory_mib: int | None
    cores: int


def claim_devices(claim: JsonObject, policy: Policy) -> list[Device]:
    """The devices of the kept groups the claim holds (from its allocation) or asks for (from
    its spec, the largest alternative of a `firstAvailable`)."""
    options = _options(claim, policy)
    drivers = {g.driver for g in groups(policy)}
    results = ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
    held = [
        r
        for r in results.get("results") or []
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
        asked = [_asked(exact, name, option, policy) for option, exact in alternatives.values()]
        devices += max(asked, key=_size)
    return devices


def _options(claim: JsonObject, policy: Policy) -> dict[str, dict[str, tuple[Option, JsonObject]]]:
    """Each request's ways (subrequest name, "" for `exactly`) that ask a kept group's class."""
    found: dict[str, dict[str, tuple[Option, JsonObject]]] = {}
    requests = (((claim.get("spec") or {}).get("devices") or {}).get("requests")) or []
    for request in requests if isinstance(requests, list) else []:
        if not isinstance(request, dict):
            continue
        ways = [("", request["exactly"])] if isinstance(request.get("exactly"), dict) else []
        ways += [
            (str(o.get("name", "")), o)
            for o in request.get("firstAvailable") or []
            if isinstance(o, dict)
        ]
        for sub, exact in ways:
            option = option_of(exact, policy)
            if option is not None:
                found.setdefault(str(request.get("name", "")), {})[sub] = (option, exact)
    return found


def _asked(exact: JsonObject, name: str, option: Option, policy: Policy) -> list[Device]:
    count = exact.get("count", 1)
    count = count if isinstance(count, int) and count > 0 else 1
    if exact.get("allocationMode") == "All":
        count = 1  # at least one; what All takes is known once allocated
    capacity = (exact.get("capacity") or {}).get("requests") or {}
    return [_device(name, capacity, option, policy)] * count


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


def _size(devices: Iterable[Device]) -> tuple[int, int, int]:
    listed = list(devices)
    whole = 2**40  # more MiB than any card: a whole card's memory outweighs any share
    memory = sum(whole if d.memory_mib is None else d.memory_mib for d in listed)
    return (len(listed), memory, sum(d.cores for d in listed))


def claims_charge(
    claims: Iterable[JsonObject], policy: Policy, keys: Mapping[str, KeyRule], cards: Cards
) -> Charge:
    """What the claims' devices are charged: HAMi's keys per device; kube-apiserver's keys once
    per request (its per-device value, as a container's request was), its count per device."""
    charge = Charge()
    for claim in claims:
        devices = claim_devices(claim, policy)
        first_of: dict[str, Device] = {}
        for device in devices:
            first_of.setdefault(device.request, device)
        for key, rule in keys.items():
            counted = (
                devices
                if rule.form == "hami" or rule.dimension == "count"
                else list(first_of.values())
            )
            for device in counted:
                if rule.group not in device.groups:
                    continue
                amount = _share_amount(device.memory_mib, None, device.cores, rule, cards)
                if amount is None:
                    charge.unknown.add(key)
                else:
                    charge.amounts[key] = charge.amounts.get(key, 0) + amount
    return charge


def exceeded(limits: Iterable[Limit], used: Charge, charge: Charge) -> tuple[Limit, str] | None:
    """The first limit the charge would push over, with kube-apiserver's words for it; None
    when it fits every limit."""
    for limit in limits:
        if limit.key in charge.unknown:
            return limit, (
                f"exceeded quota: {limit.quota}, requested: {limit.key}=unknown (the whole"
                " card's memory, and no card size is known: the driver publishes no"
                " ResourceSlice with its memory yet; for NVIDIA, or set"
                f" hamiDraWebhook.deviceMemorySizes), limited: {limit.key}={limit.hard}"
            )
        asked, now = charge.of(limit.key), used.of(limit.key)
        if asked and limit.key in used.unknown:
            return limit, (
                f"exceeded quota: {limit.quota}, requested: {limit.key}={asked}, used:"
                f" {limit.key}=unknown (a pod of the namespace holds GPUs this webhook cannot"
                f" count: see its log), limited: {limit.key}={limit.hard}"
            )
        if asked and now + asked > limit.hard:
            return limit, (
                f"exceeded quota: {limit.quota}, requested: {limit.key}={asked}, used:"
                f" {limit.key}={now}, limited: {limit.key}={limit.hard}"
            )
    return None
