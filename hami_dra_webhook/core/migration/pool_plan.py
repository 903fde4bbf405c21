"""A cluster in migration as read once (`Inventory`), and what follows from it without I/O:
the GPU pods of each pool, where each would go if it were evicted now (`plan_move`, the plan
of `migrate node`), and what keeps each legacy pod from moving to DRA (`migrate status`).

Where a pod goes is computed, never guessed: a legacy pod the scope converts is translated as
the webhook would translate it and its claims are placed on the free capacity the driver
publishes (minus what allocated claims consume); a pod that stays legacy needs as many free
`nvidia.com/gpu` slots on another legacy node. HAMi's own per-card fit (memory and cores of
each card) is not known outside hami-scheduler: a legacy destination counts slots only.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Literal

from hami_dra_webhook.core.legacy.request import has_legacy_keys, resource_maps
from hami_dra_webhook.core.migration.holdings import ClaimIndex, holds_legacy
from hami_dra_webhook.core.migration.pools import (
    DRA,
    DeviceKey,
    Free,
    Need,
    NodeGpus,
    Scope,
    Use,
    template_needs,
)
from hami_dra_webhook.core.model import label_selector
from hami_dra_webhook.core.model.claim_view import ClaimView
from hami_dra_webhook.core.model.quantity import QuantityError, parse_byte_size, parse_quantity
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.outcome.decision import Converted, Refusal
from hami_dra_webhook.core.review.translation_cache import TranslationCache
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.translate.claims import DRA_LABEL
from hami_dra_webhook.core.translate.pod_view import pod_view
from hami_dra_webhook.core.vendors.families import converted_names

Side = Literal["legacy", "converted"]
ENDED = ("Succeeded", "Failed")


@dataclass
class GpuPod:
    """A pod that uses GPUs of either pool, with what the plans need of it. `side` is what it
    holds (core/migration/holdings.py): `converted` when the driver's claims are allocated to it
    (or, not yet allocated, it names the webhook's templates), else `legacy`."""

    pod: JsonObject
    side: Side
    legacy_count: int  # nvidia.com/gpu it asks for (legacy side)
    needs: list[list[Need]] = field(default_factory=list)  # its allocated devices (converted)
    holds_dra: bool = False  # the driver's claims are allocated to it
    holds_legacy: bool = False  # HAMi's device plugin serves it
    claims: list[str] = field(default_factory=list)  # the driver's claims allocated to it

    @property
    def namespace(self) -> str:
        return str(self.pod["metadata"].get("namespace", ""))

    @property
    def name(self) -> str:
        return str(self.pod["metadata"].get("name", ""))

    @property
    def node(self) -> str:
        return str((self.pod.get("spec") or {}).get("nodeName") or "")

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.pod["metadata"].get("labels") or {})

    @property
    def owner(self) -> str:
        """`Kind/name` of its controller, "" for a bare pod (evicting it loses it)."""
        for reference in self.pod["metadata"].get("ownerReferences") or []:
            if reference.get("controller"):
                return f"{reference.get('kind')}/{reference.get('name')}"
        return ""

    @property
    def daemon(self) -> bool:
        return self.owner.startswith("DaemonSet/")


def gpu_pod(pod: JsonObject, policy: Policy, claims: ClaimIndex) -> GpuPod | None:
    """The pod as a GpuPod when it holds or asks for GPUs of either pool and has not ended,
    else None; `claims`: the driver's allocated claims, whatever the pod's labels say."""
    status = pod.get("status") or {}
    if status.get("phase") in ENDED:
        return None
    spec = pod.get("spec") or {}
    held = claims.held_by(pod)
    legacy = holds_legacy(pod, policy)
    if held:
        needs = [need for claim in held for need in _allocated_needs(claim, claims.driver)]
        names = [claim.name for claim in held]
        # never translated again (its replacement keeps its claims' shape): no spec kept
        mine = kept(pod, spec=legacy)
        return GpuPod(mine, "converted", len(needs), needs, True, legacy, claims=names)
    if legacy:
        return GpuPod(kept(pod), "legacy", _legacy_count(spec, policy), holds_legacy=True)
    if _names_webhook_templates(pod, policy):
        return GpuPod(kept(pod), "converted", 0)
    return None


KEPT_METADATA = ("name", "namespace", "uid", "labels", "ownerReferences", "deletionTimestamp")


def kept(pod: JsonObject, spec: bool = True) -> JsonObject:
    """What a GpuPod keeps of its pod, once judged: what the translation reads (pod_view: a
    replacement is planned from it; not with `spec=False`), its identity, all its labels
    (scope, disruption budgets; extra labels change no translation) and owner, and its node.
    Its status, volumes and probes are dropped: twenty thousand whole pods would hold about
    400 MiB in a plan."""
    view: JsonObject = pod_view(pod) if spec else {"metadata": {}}
    metadata = pod.get("metadata") or {}
    view_metadata = view.setdefault("metadata", {})
    view_metadata.update({key: metadata[key] for key in KEPT_METADATA if key in metadata})
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        view.setdefault("spec", {})["nodeName"] = node
    return view


def _names_webhook_templates(pod: JsonObject, policy: Policy) -> bool:
    """A converted pod whose claims are not allocated yet: its label, or a claim from one of
    the webhook's templates (the label alone can be removed by the pod's owner)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if isinstance(labels, dict) and labels.get(DRA_LABEL) == "true":
        return True
    prefix = policy.webhook.template_name_prefix
    entries = (pod.get("spec") or {}).get("resourceClaims") or []
    return any(
        isinstance(e, dict) and str(e.get("resourceClaimTemplateName", "")).startswith(prefix)
        for e in entries
    )


def _legacy_count(spec: JsonObject, policy: Policy) -> int:
    """nvidia.com/gpu of the pod: the app containers' sum, or its largest init container's
    (as HAMi counts the peak); a container with memory or cores but no count asks for
    defaultGPUNum."""
    names = policy.legacy_resource_names

    def count(container: JsonObject) -> int:
        limits, requests = resource_maps(container)
        value = limits.get(names.gpus, requests.get(names.gpus))
        if value is None:
            return (
                policy.nvidia.default_gpu_num
                if has_legacy_keys(container, converted_names(policy))
                else 0
            )
        try:
            return max(0, int(parse_quantity(str(value))))
        except (QuantityError, ValueError):
            return 0

    apps = sum(count(c) for c in spec.get("containers") or [] if isinstance(c, dict))
    inits = [count(c) for c in spec.get("initContainers") or [] if isinstance(c, dict)]
    return max([apps, *inits])


def _allocated_needs(claim: ClaimView, driver: str) -> list[list[Need]]:
    needs = []
    for result in claim.results_of(driver):
        memory, cores = result.consumed_of("memory"), result.consumed_of("cores")
        try:
            need = Need(
                parse_byte_size(memory) if memory is not None else None,
                int(parse_quantity(cores)) if cores is not None else None,
            )
        except (QuantityError, ValueError):
            need = Need(None, None)
        needs.append([need])
    return needs


@dataclass
class Inventory:
    """What the migration commands judge, read from the cluster once."""

    nodes: dict[str, NodeGpus]
    used: dict[DeviceKey, Use]
    pods: list[GpuPod]
    namespace_labels: dict[str, dict[str, str]]
    budgets: list[JsonObject]
    scope: Scope
    _by_node: dict[str, list[GpuPod]] | None = field(default=None, repr=False, compare=False)
    # A ReplicaSet's pods translate alike: one translation each (a plan of 10,000 legacy pods)
    translations: TranslationCache = field(
        default_factory=TranslationCache, repr=False, compare=False
    )

    def free(self) -> Free:
        return Free.of(self.nodes.values(), self.used)

    def on(self, node: str) -> list[GpuPod]:
        if self._by_node is None:  # read once: a wave of 50 of 1,000 nodes asks 50 times
            self._by_node = {}
            for pod in self.pods:
                self._by_node.setdefault(pod.node, []).append(pod)
        return list(self._by_node.get(node, []))

    def in_scope(self, pod: GpuPod) -> bool:
        return self.scope.converts(self.namespace_labels.get(pod.namespace, {}), pod.labels)

    def blocking_budgets(self, pod: GpuPod) -> list[str]:
        """The PodDisruptionBudgets that select the pod and allow no disruption now."""
        found = []
        for budget in self.budgets:
            metadata = budget.get("metadata") or {}
            if metadata.get("namespace") != pod.namespace:
                continue
            selector = (budget.get("spec") or {}).get("selector")
            if not label_selector.matches(selector, pod.labels):
                continue
            if int((budget.get("status") or {}).get("disruptionsAllowed") or 0) < 1:
                found.append(str(metadata.get("name")))
        return found


@dataclass
class Step:
    """One GPU pod of the node and where it would go."""

    node: str
    namespace: str
    name: str
    side: Side
    owner: str
    goes: str  # in words: "converted onto DRA node-2", "legacy node-3", ...
    fits: bool
    budgets: list[str] = field(default_factory=list)
    # A move to legacy (a rollback): the driver's claims allocated to it on the node. A
    # rollback refuses while there are any (--force evicts the pod: it comes back converted).
    claims: list[str] = field(default_factory=list)

    @property
    def lost(self) -> bool:
        """No controller re-creates it after eviction."""
        return not self.owner

    @property
    def blocks(self) -> bool:
        """The move refuses (without --force): it would be lost, fits nowhere, or holds the
        driver's claims on a node going back to legacy."""
        return self.lost or not self.fits or bool(self.claims)

    def as_json(self) -> JsonObject:
        return {
            "node": self.node,
            "namespace": self.namespace,
            "name": self.name,
            "side": self.side,
            "owner": self.owner,
            "goes": self.goes,
            "fits": self.fits,
            "blockingBudgets": self.budgets,
            "lostOnEviction": self.lost,
            "allocatedClaims": self.claims,
        }


def destination(
    pod: GpuPod, inventory: Inventory, free: Free, policy: Policy, skip: str | Collection[str]
) -> tuple[str, bool]:
    """Where the pod's replacement would go if it were evicted now (capacity taken from
    `free`, on no node in `skip`), in words, and whether it fits."""
    skip = frozenset((skip,) if isinstance(skip, str) else skip)
    if pod.daemon:
        return "a DaemonSet pod: not evicted, it stays with the node", True
    if not inventory.in_scope(pod):
        return _legacy_place(
            pod.legacy_count, free, skip, "not in the migration scope: stays legacy"
        )
    if pod.side == "converted":
        node = free.place_dra(pod.needs, skip=skip)
        if node is None:
            return "nowhere: no DRA node has free capacity for its claims", False
        return f"DRA node {node} (its claims as allocated now)", True
    decision = inventory.translations.decide(_recreated(pod.pod), policy, pod.namespace)
    if isinstance(decision, Refusal):
        return f"refused when re-created: {decision.message}", False
    if not isinstance(decision, Converted):
        return _legacy_place(pod.legacy_count, free, skip, "left unchanged by the webhook")
    needs = [need for template in decision.templates for need in template_needs(template)]
    node = free.place_dra(needs, skip=skip)
    if node is None:
        return "nowhere: converted, no DRA node has free capacity for its claims", False
    return f"converted onto DRA node {node}", True


def _legacy_place(count: int, free: Free, skip: frozenset[str], why: str) -> tuple[str, bool]:
    node = free.place_legacy(count, skip=skip)
    if node is None:
        return f"nowhere: {why}, and no other legacy node has {count} free nvidia.com/gpu", False
    return f"legacy node {node} ({why})", True


def _recreated(pod: JsonObject) -> JsonObject:
    """The pod as its controller would create it again: no node, no status."""
    spec = {k: v for k, v in (pod.get("spec") or {}).items() if k != "nodeName"}
    metadata = {
        k: v
        for k, v in (pod.get("metadata") or {}).items()
        if k in ("labels", "annotations", "namespace", "generateName", "ownerReferences")
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def leaves(pod: GpuPod, to: str) -> bool:
    """Whether a move of the pod's node to pool `to` must evict it: it holds what the pool the
    node leaves serves (the driver's claims, or the device plugin's devices), or, leaving
    DRA, it is a converted pod whose claims are not allocated yet (bound there, it would wait
    for the driver)."""
    if to == DRA:
        return pod.holds_legacy
    return pod.holds_dra or pod.side == "converted"


def plan_move(
    inventory: Inventory, node: str | Collection[str], to: str, policy: Policy
) -> list[Step]:
    """Every GPU pod on `node` (or on each of several nodes moved together) that the move to
    pool `to` evicts, with where it would go: on none of the nodes moved, each pod taking
    its room from what the pods before it left."""
    nodes = (node,) if isinstance(node, str) else tuple(node)
    free = inventory.free()
    steps = []
    moved = [p for p in inventory.pods if p.node in nodes and leaves(p, to)]
    for pod in sorted(moved, key=lambda p: (p.node, p.namespace, p.name)):
        goes, fits = destination(pod, inventory, free, policy, skip=nodes)
        steps.append(
            Step(
                pod.node,
                pod.namespace,
                pod.name,
                pod.side,
                pod.owner,
                goes,
                fits,
                inventory.blocking_budgets(pod),
                pod.claims if to != DRA and not pod.daemon else [],
            )
        )
    return steps
