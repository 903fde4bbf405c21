"""One namespace's quota pass, decided from its live pods and claims: the usage of every pod
that is counted, and which held pods (scheduling gate `hami.io/gpu-quota`) may go, oldest
first, each only while every limit still holds with it. No I/O.

Counted: every pod not held, not Succeeded or Failed (a terminating pod keeps its charge until
it is gone, as HAMi's count and kube-apiserver's do), legacy and converted alike, each claim
once (two pods sharing a claim share its charge). So the sum over the namespace stays within
`hard` whichever pool a pod lands in, as long as every GPU pod created in it is held first
(docs/quotas.md states the rule and its proof).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hami_dra_webhook.core.legacy.request import has_legacy_keys
from hami_dra_webhook.core.model.containers import containers
from hami_dra_webhook.core.model.pod_view import PodView
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.quota.claim_charge import claims_charge, devices_charge, implicit_devices
from hami_dra_webhook.core.quota.gpu_quota import (
    GATE,
    HELD_LABEL,
    HELD_LABEL_VALUE,
    Charge,
    KeyRule,
    Limit,
    container_kinds,
    exceeded,
    legacy_charge,
    pod_sum,
)
from hami_dra_webhook.core.quota.quota_groups import Cards
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.vendors.families import converted_names

WAITING_FOR_CLAIMS = "waiting for its ResourceClaims to be created"


@dataclass(frozen=True, slots=True)
class Held:
    name: str
    uid: str
    resource_version: str
    gate_index: int  # where the gate sits in spec.schedulingGates
    reason: str  # kube-apiserver's words for the limit it would exceed, or what it waits for
    quota: str  # the quota it would exceed ("" when it waits for something else)
    key: str = ""  # the key of that quota it would exceed
    labelled: bool = False  # carries the held label (removed with the gate)


@dataclass
class QuotaPass:
    usage: Charge = field(default_factory=Charge)
    release: list[Held] = field(default_factory=list)  # reason "": fits
    held: list[Held] = field(default_factory=list)


class Count:
    """A namespace's usage, counted one pod at a time (pages of pods are streamed through it,
    so that only held pods are kept), from its claims' charges (computed once each)."""

    def __init__(
        self,
        claims: Mapping[str, Charge],  # claim_charges(...)
        policy: Policy,
        keys: Mapping[str, KeyRule],
        cards: Cards,
    ) -> None:
        self.policy, self.keys, self.cards = policy, keys, cards
        self.names = frozenset(converted_names(policy))
        self.claims = claims
        self.usage = Charge()
        self.counted: set[str] = set()  # claim names already charged
        self.held: list[tuple[JsonObject, PodView]] = []

    def add(self, pod: JsonObject) -> None:
        """Count a pod (or keep it, when it is held)."""
        view = PodView.of(pod)
        if view.ended:
            return
        if view.gate_index(GATE) is not None:
            self.held.append((pod, view))
            return
        charge, missing = self.charge(pod, view, self.counted)
        self.usage.add(charge)
        if missing:  # a claim made between our reads, or never: counted as unknown (held)
            self.usage.unknown |= set(self.keys)

    def charge(self, pod: JsonObject, view: PodView, counted: set[str]) -> tuple[Charge, bool]:
        """The pod's charge (its claims not in `counted`, which it adds them to) and whether a
        claim it uses does not exist yet."""
        charge = Charge()
        wanted, missing = view.claim_names()
        scheduler_claimed = bool(view.scheduler_claim)
        if any(has_legacy_keys(c, self.names) for c in _containers(pod.get("spec"))):
            charge.add(legacy_charge(pod, self.policy, self.keys, self.cards, scheduler_claimed))
        if not scheduler_claimed:
            charge.add(self._implicit(pod))
        for name in wanted:
            claim = self.claims.get(name)
            if claim is None:
                missing = True
            elif name not in counted:
                counted.add(name)
                charge.add(claim)
        return charge, missing

    def _implicit(self, pod: JsonObject) -> Charge:
        """What the pod asks through a kept DeviceClass's implicit extended resource, before
        kube-scheduler makes its claim (which is charged then)."""
        kinds = container_kinds(pod)
        placed = []
        for ref, container in containers(pod.get("spec")):
            devices = implicit_devices(container, self.policy)
            if devices:
                charge = devices_charge(devices, self.keys, self.cards)
                placed.append((charge, kinds.get((ref.list_name, ref.position), "app")))
        return pod_sum(placed) if placed else Charge()


def claim_charges(
    claims: Iterable[Any],
    policy: Policy,
    keys: Mapping[str, KeyRule],
    cards: Cards,
    into: dict[str, Charge] | None = None,
) -> dict[str, Charge]:
    """Each claim's charge by its name (`into`, when given, gets them); claims charged alike
    share one (read-only) Charge, so ten thousand claims of one shape hold one."""
    found = {} if into is None else into
    shared: dict[tuple[Any, ...], Charge] = {}
    for claim in claims:
        if not isinstance(claim, dict):
            continue
        charge = claims_charge([claim], policy, keys, cards)
        key = (tuple(sorted(charge.amounts.items())), frozenset(charge.unknown))
        found[str((claim.get("metadata") or {}).get("name", ""))] = shared.setdefault(key, charge)
    return found


def plan_pass(
    pods: Iterable[JsonObject],
    claims: Iterable[JsonObject],
    limits: list[Limit],
    policy: Policy,
    keys: Mapping[str, KeyRule],
    cards: Cards,
) -> QuotaPass:
    """The namespace's usage and what each held pod gets: released while it fits (every pod
    when there is no limit), held with the reason otherwise."""
    count = Count(claim_charges(claims, policy, keys, cards), policy, keys, cards)
    for pod in pods:
        count.add(pod)
    return release(count, limits)


def release(count: Count, limits: list[Limit]) -> QuotaPass:
    """What each held pod of a finished count gets, oldest first."""
    result = QuotaPass(usage=count.usage)
    held = sorted(count.held, key=lambda pair: (pair[1].created, pair[1].name))
    for pod, view in held:
        charge, missing = count.charge(pod, view, set(count.counted))
        base = (view.name, view.uid, view.resource_version, view.gate_index(GATE) or 0)
        labelled = view.labels.get(HELD_LABEL) == HELD_LABEL_VALUE
        if missing:
            result.held.append(Held(*base, WAITING_FOR_CLAIMS, "", labelled=labelled))
            continue
        over = exceeded(limits, result.usage, charge)
        if over is not None:
            result.held.append(Held(*base, over[1], over[0].quota, over[0].key, labelled))
            continue
        count.charge(pod, view, count.counted)  # its claims now counted
        result.usage.add(charge)
        result.release.append(Held(*base, "", "", labelled=labelled))
    return result


def _containers(spec: object) -> list[object]:
    """The entries of the spec's container lists (no places: this is every pod's hot path)."""
    if not isinstance(spec, dict):
        return []
    found: list[object] = []
    for key in ("containers", "initContainers"):
        items = spec.get(key)
        found += items if isinstance(items, list) else []
    return found
