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

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from hami_dra_webhook.core.claims import DRA_LABEL
from hami_dra_webhook.core.containers import containers
from hami_dra_webhook.core.decision import Converted, Refusal
from hami_dra_webhook.core.legacy import has_legacy_keys, resource_maps
from hami_dra_webhook.core.policy import Policy
from hami_dra_webhook.core.pools import (
    DRA,
    LEGACY,
    DeviceKey,
    Free,
    Need,
    NodeGpus,
    Scope,
    Use,
    label_selector_matches,
    template_needs,
)
from hami_dra_webhook.core.quantity import QuantityError, parse_byte_size, parse_quantity
from hami_dra_webhook.core.translate import translate_pod
from hami_dra_webhook.core.types import JsonObject
from hami_dra_webhook.core.vendors.families import converted_names

Side = Literal["legacy", "converted"]
ENDED = ("Succeeded", "Failed")


@dataclass
class GpuPod:
    """A pod that uses GPUs of either pool, with what the plans need of it."""

    pod: JsonObject
    side: Side
    legacy_count: int  # nvidia.com/gpu it asks for (legacy side)
    needs: list[list[Need]] = field(default_factory=list)  # its allocated devices (converted)

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


def gpu_pod(
    pod: JsonObject, policy: Policy, claims: Mapping[tuple[str, str], JsonObject]
) -> GpuPod | None:
    """The pod as a GpuPod when it uses GPUs of either pool and has not ended, else None;
    `claims` by (namespace, name), for a converted pod's allocations."""
    status = pod.get("status") or {}
    if status.get("phase") in ENDED:
        return None
    spec = pod.get("spec") or {}
    names = converted_names(policy)
    every = [c for _, c in containers(spec) if isinstance(c, dict)]
    if any(has_legacy_keys(c, names) for c in every):
        return GpuPod(pod, "legacy", _legacy_count(spec, policy))
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if labels.get(DRA_LABEL) != "true":
        return None
    namespace = str(pod["metadata"].get("namespace", ""))
    needs: list[list[Need]] = []
    for entry in status.get("resourceClaimStatuses") or []:
        claim = claims.get((namespace, str(entry.get("resourceClaimName"))))
        if claim is not None:
            needs += _allocated_needs(claim, policy.webhook.driver_name)
    return GpuPod(pod, "converted", sum(len(n) for n in needs), needs)


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


def _allocated_needs(claim: JsonObject, driver: str) -> list[list[Need]]:
    allocation = ((claim.get("status") or {}).get("allocation")) or {}
    needs = []
    for result in ((allocation.get("devices") or {}).get("results")) or []:
        if result.get("driver") != driver:
            continue
        consumed = result.get("consumedCapacity") or {}
        try:
            memory = parse_byte_size(str(consumed["memory"])) if "memory" in consumed else None
            cores = int(parse_quantity(str(consumed["cores"]))) if "cores" in consumed else None
        except (QuantityError, ValueError):
            memory, cores = None, None
        needs.append([Need(memory, cores)])
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

    def free(self) -> Free:
        return Free.of(self.nodes.values(), self.used)

    def on(self, node: str) -> list[GpuPod]:
        return [p for p in self.pods if p.node == node]

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
            if not isinstance(selector, dict) or not label_selector_matches(selector, pod.labels):
                continue
            if int((budget.get("status") or {}).get("disruptionsAllowed") or 0) < 1:
                found.append(str(metadata.get("name")))
        return found


@dataclass
class Step:
    """One GPU pod of the node and where it would go."""

    namespace: str
    name: str
    side: Side
    owner: str
    goes: str  # in words: "converted onto DRA node-2", "legacy node-3", ...
    fits: bool
    budgets: list[str] = field(default_factory=list)

    @property
    def lost(self) -> bool:
        """No controller re-creates it after eviction."""
        return not self.owner

    def as_json(self) -> JsonObject:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "side": self.side,
            "owner": self.owner,
            "goes": self.goes,
            "fits": self.fits,
            "blockingBudgets": self.budgets,
            "lostOnEviction": self.lost,
        }


def destination(
    pod: GpuPod, inventory: Inventory, free: Free, policy: Policy, skip: str
) -> tuple[str, bool]:
    """Where the pod's replacement would go if it were evicted now (capacity taken from
    `free`), in words, and whether it fits."""
    if pod.daemon:
        return "a DaemonSet pod: not evicted, it stays with the node", True
    if not inventory.in_scope(pod):
        return _legacy_place(
            pod.legacy_count, free, skip, "not in the migration scope: stays legacy"
        )
    if pod.side == "converted":
        node = free.place_dra(pod.needs, skip_node=skip)
        if node is None:
            return "nowhere: no DRA node has free capacity for its claims", False
        return f"DRA node {node} (its claims as allocated now)", True
    decision = translate_pod(_recreated(pod.pod), policy, pod.namespace)
    if isinstance(decision, Refusal):
        return f"refused when re-created: {decision.message}", False
    if not isinstance(decision, Converted):
        return _legacy_place(pod.legacy_count, free, skip, "left unchanged by the webhook")
    needs = [need for template in decision.templates for need in template_needs(template)]
    node = free.place_dra(needs, skip_node=skip)
    if node is None:
        return "nowhere: converted, no DRA node has free capacity for its claims", False
    return f"converted onto DRA node {node}", True


def _legacy_place(count: int, free: Free, skip: str, why: str) -> tuple[str, bool]:
    node = free.place_legacy(count, skip_node=skip)
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


def plan_move(inventory: Inventory, node: str, to: str, policy: Policy) -> list[Step]:
    """Every GPU pod on `node` that the move to pool `to` evicts, with where it would go."""
    free = inventory.free()
    steps = []
    leaving = "legacy" if to == DRA else "converted"
    for pod in sorted(inventory.on(node), key=lambda p: (p.namespace, p.name)):
        if pod.side != leaving and to in (DRA, LEGACY):
            continue
        goes, fits = destination(pod, inventory, free, policy, skip=node)
        steps.append(
            Step(
                pod.namespace,
                pod.name,
                pod.side,
                pod.owner,
                goes,
                fits,
                inventory.blocking_budgets(pod),
            )
        )
    return steps
