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
from functools import lru_cache
from typing import Any, Literal

from hami_dra_webhook.core.model.containers import containers
from hami_dra_webhook.core.model.quantity import QuantityError, parse_quantity
from hami_dra_webhook.core.model.resource_quota_view import ResourceQuotaView
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.outcome.decision import Converted
from hami_dra_webhook.core.quota.quota_groups import (
    NVIDIA,
    Cards,
    container_use,
    groups,
)
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.translate.pod import translate_pod
from hami_dra_webhook.core.translate.whole_gpus import left_to_scheduler
from hami_dra_webhook.core.vendors.families import converted_names

# The scheduling gate that holds a GPU pod of a namespace with such a quota until it is counted.
GATE = "hami.io/gpu-quota"
# On a pod created held (with the gate): tells the quota work which namespaces have held pods
# (cluster/quota/work.py). Only a hint, which a tenant can write or remove: it decides nothing
# a pod is charged, and costs a tenant who abuses it only counts of its own namespace.
HELD_LABEL = "hami.io/gpu-quota"
HELD_LABEL_VALUE = "held"
# On a Namespace whose quotas name such a key (set by the webhook): shows which namespaces hold
# their GPU pods, and scopes the claims' check (admission/quota_gate.py); the gate itself is
# decided from the quotas.
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
    for quota in map(ResourceQuotaView.of, quotas):
        for key, value in quota.hard.items():
            if key in keys:
                amount, rule = _whole(value), keys[key]
                if amount is not None and (rule.dimension, rule.form) == ("memory", "hami"):
                    amount *= rule.memory_factor
                if amount is not None:
                    found.append(Limit(quota.name, key, amount))
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
    pod: JsonObject,
    policy: Policy,
    keys: Mapping[str, KeyRule],
    cards: Cards,
    scheduler_claimed: bool = False,
) -> Charge:
    """What a pod with legacy resources is charged: HAMi's keys as HAMi counts the devices it
    gives (per device times devices), kube-apiserver's keys as its quota counts requests (per
    container); containers summed as kube-apiserver sums them (`pod_sum`). A count-only pod
    left to kube-scheduler (wholeGpusByExtendedResource) is charged the whole cards the webhook
    would have given it, until kube-scheduler's own claim for it exists
    (`scheduler_claimed`): that claim is charged then, not this."""
    decision = translate_pod(pod, policy)
    if not isinstance(decision, Converted) and policy.webhook.whole_gpus_by_extended_resource:
        spec, metadata = pod.get("spec"), pod.get("metadata")
        if (
            isinstance(metadata, dict)
            and isinstance(spec, dict)
            and left_to_scheduler(metadata, spec, containers(spec), policy)
        ):
            if scheduler_claimed:
                return Charge()
            decision = translate_pod(pod, _converting_whole_gpus(policy))
    if not isinstance(decision, Converted):
        # Not readable as legacy HAMi reads it here (a percentage with no card size known, a
        # value this project refuses): unknown, so nothing that asks these keys fits beside it.
        return Charge(unknown=set(keys))
    kinds = container_kinds(pod)
    placed: list[tuple[Charge, Kind]] = []
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
            per_device = share_amount(use.memory_mib, use.percentage, use.cores, rule, cards)
            if per_device is None:
                one.unknown.add(key)
            else:
                one.amounts[key] = per_device * use.devices
        placed.append((one, kinds.get((planned.ref.list_name, planned.ref.position), "app")))
    return pod_sum(placed)


@lru_cache(maxsize=16)
def _converting_whole_gpus(policy: Policy) -> Policy:
    """The policy as it reads a count-only pod when the webhook converts it (what kube-scheduler
    gives it is the same: whole cards, core/translate/whole_gpus.py)."""
    web = policy.webhook.model_copy(update={"whole_gpus_by_extended_resource": False})
    return policy.with_webhook(web)


Kind = Literal["app", "sidecar", "init"]


def container_kinds(pod: JsonObject) -> dict[tuple[str, int], Kind]:
    """Each init container's kind by its place: a sidecar (`restartPolicy: Always`) runs beside
    the app containers, any other init container to its end before them."""
    spec = pod.get("spec")
    kinds: dict[tuple[str, int], Kind] = {}
    for ref, container in containers(spec):
        if ref.list_name == "initContainers":
            sidecar = isinstance(container, dict) and container.get("restartPolicy") == "Always"
            kinds[(ref.list_name, ref.position)] = "sidecar" if sidecar else "init"
    return kinds


def pod_sum(placed: Iterable[tuple[Charge, Kind]]) -> Charge:
    """A pod's charge from its containers', as kube-apiserver's quota sums requests
    (component-helpers' PodRequests): the app containers and the sidecars add up; each init
    container that runs to its end runs beside the sidecars listed before it; the pod holds
    the larger of the two. (HAMi's own max(sum of the app containers, largest init container)
    is never more: a sidecar of HAMi's pods is counted here as what it holds, beside the app
    containers.) `placed`: init containers in their order."""
    total, sidecars, peak = Charge(), Charge(), Charge()
    for one, kind in placed:
        if kind == "app":
            total.add(one)
            continue
        now = Charge()
        now.add(one)
        if kind == "sidecar":
            total.add(one)
            sidecars.add(one)
            now = Charge(dict(sidecars.amounts), set(sidecars.unknown))
        else:
            now.add(sidecars)
        peak = Charge(
            {k: max(peak.of(k), now.of(k)) for k in {*peak.amounts, *now.amounts}},
            peak.unknown | now.unknown,
        )
    return Charge(
        {k: max(total.of(k), peak.of(k)) for k in {*total.amounts, *peak.amounts}},
        total.unknown | peak.unknown,
    )


def share_amount(
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
