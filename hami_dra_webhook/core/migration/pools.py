"""The two GPU pools of a cluster in migration, as plain data: which pool a node is in and what
serves it, the capacity each pool has and uses, which pods a migration scope converts, and
where a pod would go (first fit over published capacity minus current allocations).

A node is in the legacy pool (HAMi's device plugin advertises `nvidia.com/gpu` there) or in
the DRA pool (the DRA driver publishes its devices there), never in both: the two would
promise the same card twice. The label `hami.io/gpu-pool` says which it should be; `moving`
is neither (a node between pools, served by nobody). No I/O here.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from hami_dra_webhook.core.model.claim_view import ClaimView
from hami_dra_webhook.core.model.node_view import NodeView
from hami_dra_webhook.core.model.pod_view import PodView
from hami_dra_webhook.core.model.quantity import MIB, QuantityError, parse_byte_size, parse_quantity
from hami_dra_webhook.core.model.slice_view import SliceView
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.translate.pod_view import OPT_OUT_LABEL

POOL_LABEL = "hami.io/gpu-pool"
LEGACY = "legacy"
DRA = "dra"
MOVING = "moving"  # between pools: the move has drained it; nothing may serve it
POOLS = (LEGACY, DRA)
# The state of a move in progress, on the Node (JSON), so that a second run resumes it.
MOVE_ANNOTATION = "hami.io/gpu-pool-move"
# The opt-in label of a migration scope, on namespaces (scope `namespaces`) or on pods, that
# is the pod templates of workloads (scope `workloads`).
SCOPE_LABEL = "hami.io/gpu-migration"
SCOPE_VALUE = "dra"
ScopeMode = Literal["all", "namespaces", "workloads"]
SCOPES: tuple[ScopeMode, ...] = ("all", "namespaces", "workloads")
# How clusters label NVIDIA GPU nodes: GPU feature discovery, Node Feature Discovery's PCI
# vendor label (10de is NVIDIA); the chart's driver.nodeAffinity uses the same two.
# The chart's driver pods (its DaemonSet's pod label): `check` reads them, a node move waits
# for the one on its node to be Ready.
GPU_NODE_LABELS = ("nvidia.com/gpu.present", "feature.node.kubernetes.io/pci-10de.present")
FULL_CORES = 100


@dataclass(frozen=True)
class Scope:
    """Which pods the webhook converts: every pod (`all`), the pods of namespaces labelled
    `hami.io/gpu-migration=dra` (`namespaces`), or pods so labelled, through their workload's
    pod template (`workloads`). Every other pod stays with legacy HAMi."""

    mode: ScopeMode = "all"

    def converts(self, namespace_labels: Mapping[str, str], pod_labels: Mapping[str, str]) -> bool:
        if self.mode == "namespaces":
            return namespace_labels.get(SCOPE_LABEL) == SCOPE_VALUE
        if self.mode == "workloads":
            return pod_labels.get(SCOPE_LABEL) == SCOPE_VALUE
        return True

    def selects_pod(self, pod_labels: Mapping[str, str]) -> bool:
        """Whether the pod webhook is sent pods with these labels (its objectSelector): not
        opted out, and opted in under `workloads`. The same rule judges a pod template whose
        pods it never sees (a Volcano Job's tasks, the workloads' preview); the namespace term
        is the webhook configuration's namespaceSelector, the same for every webhook."""
        if pod_labels.get(OPT_OUT_LABEL) == "ignore":
            return False
        return self.mode != "workloads" or pod_labels.get(SCOPE_LABEL) == SCOPE_VALUE

    @classmethod
    def of_webhook(cls, webhook: JsonObject) -> Scope:
        """The scope a MutatingWebhookConfiguration's pod webhook applies (the chart writes it
        as a namespaceSelector or objectSelector expression on SCOPE_LABEL)."""
        for field_name, mode in (
            ("namespaceSelector", "namespaces"),
            ("objectSelector", "workloads"),
        ):
            selector = webhook.get(field_name) or {}
            for expression in selector.get("matchExpressions") or []:
                if expression.get("key") == SCOPE_LABEL and expression.get("operator") == "In":
                    return cls(mode)  # type: ignore[arg-type]
            if (selector.get("matchLabels") or {}).get(SCOPE_LABEL) == SCOPE_VALUE:
                return cls(mode)  # type: ignore[arg-type]
        return cls("all")


def template_labels(template: JsonObject) -> dict[str, str]:
    """A pod's or pod template's labels ({} when they are not a map)."""
    metadata = template.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    return labels if isinstance(labels, dict) else {}


@dataclass(frozen=True)
class Device:
    """One card the DRA driver publishes: its node, slice pool and name, and its capacity."""

    node: str
    pool: str
    name: str
    memory: int  # bytes
    cores: int


@dataclass
class Use:
    memory: int = 0
    cores: int = 0


@dataclass
class NodeGpus:
    """A node's GPU side: its pool label, what serves it, what its pods use."""

    name: str
    label: str  # the pool label's value, "" when absent
    gpu_node: bool  # labelled as a GPU node, or served by either side
    unschedulable: bool
    legacy_slots: int  # allocatable nvidia.com/gpu (the device plugin's virtual devices)
    legacy_used: int = 0  # nvidia.com/gpu of the pods bound there
    devices: list[Device] = field(default_factory=list)
    pods: int = 0  # GPU pods bound there
    labels: Mapping[str, str] = field(default_factory=dict)
    move: str = ""  # the annotation MOVE_ANNOTATION: a move's state, "" when none

    @property
    def served_by(self) -> tuple[str, ...]:
        return tuple(
            pool
            for pool, served in ((LEGACY, self.legacy_slots > 0), (DRA, bool(self.devices)))
            if served
        )

    @property
    def pool(self) -> str:
        """The pool it is in: what serves it, else what its label says; "" for neither."""
        served = self.served_by
        if len(served) == 1:
            return served[0]
        if not served and self.label in POOLS:
            return self.label
        return ""


def node_gpus(
    node: JsonObject | NodeView, legacy_count_name: str, devices: list[Device]
) -> NodeGpus:
    view = node if isinstance(node, NodeView) else NodeView.of(node)
    slots = _count(view.allocatable.get(legacy_count_name))
    return NodeGpus(
        name=view.name,
        label=view.labels.get(POOL_LABEL, ""),
        gpu_node=any(view.labels.get(x) == "true" for x in GPU_NODE_LABELS)
        or slots > 0
        or bool(devices),
        unschedulable=view.unschedulable,
        legacy_slots=slots,
        devices=devices,
        labels=dict(view.labels),
        move=view.annotations.get(MOVE_ANNOTATION, ""),
    )


def _count(value: object) -> int:
    try:
        return max(0, int(parse_quantity(str(value)))) if value is not None else 0
    except (QuantityError, ValueError):
        return 0


def slice_devices(resource_slice: JsonObject) -> list[Device]:
    """The devices of one ResourceSlice of the driver, with their memory and cores."""
    view = SliceView.of(resource_slice)
    return [
        Device(
            view.node_name,
            view.pool,
            device.name,
            _capacity_value(device.capacity.get("memory"), bytes_=True),
            _capacity_value(device.capacity.get("cores"), bytes_=False) or FULL_CORES,
        )
        for device in view.devices
    ]


def _capacity_value(value: str | None, *, bytes_: bool) -> int:
    if value is None:
        return 0
    try:
        return parse_byte_size(value) if bytes_ else int(parse_quantity(value))
    except (QuantityError, ValueError):
        return 0


DeviceKey = tuple[str, str]  # (slice pool, device name)


def allocated(claims: Iterable[ClaimView], driver: str) -> dict[DeviceKey, Use]:
    """What the allocated claims take from each device of `driver`: their consumed capacity,
    or the whole device when a result has none (an exclusive allocation)."""
    used: dict[DeviceKey, Use] = {}
    for claim in claims:
        for result in claim.results_of(driver):
            use = used.setdefault((result.pool, result.device), Use())
            if not result.shares:
                use.memory, use.cores = 1 << 62, FULL_CORES  # whole device
                continue
            try:
                use.memory += parse_byte_size(result.consumed_of("memory") or "0")
                use.cores += int(parse_quantity(result.consumed_of("cores") or "0"))
            except (QuantityError, ValueError):
                use.memory, use.cores = 1 << 62, FULL_CORES
    return used


@dataclass(frozen=True)
class Need:
    """One device a pod needs from the DRA pool: memory in bytes and cores, None for what the
    device's requestPolicy gives by default (the whole)."""

    memory: int | None
    cores: int | None


def template_needs(template: JsonObject) -> list[list[Need]]:
    """The devices one ResourceClaimTemplate asks for, by request: each request's count of
    devices with its capacity (the first alternative of a `firstAvailable`)."""
    spec = ((template.get("spec") or {}).get("spec")) or {}
    needs = []
    for request in ((spec.get("devices") or {}).get("requests")) or []:
        exact = request.get("exactly") or (request.get("firstAvailable") or [{}])[0]
        capacity = ((exact.get("capacity") or {}).get("requests")) or {}
        memory = capacity.get("memory")
        cores = capacity.get("cores")
        need = Need(
            parse_byte_size(str(memory)) if memory is not None else None,
            int(parse_quantity(str(cores))) if cores is not None else None,
        )
        needs.append([need] * int(exact.get("count", 1) or 1))
    return needs


@dataclass
class Free:
    """What is left of each device of the DRA pool, and of each legacy node's slots."""

    devices: dict[DeviceKey, tuple[Device, Use]] = field(default_factory=dict)
    slots: dict[str, int] = field(default_factory=dict)
    # first-fit's memory: where to start for a shape of needs; filled by the placements
    _order: list[tuple[str, list[DeviceKey]]] | None = field(default=None, repr=False)
    _legacy_order: list[str] = field(default_factory=list, repr=False)
    _cursor: dict[tuple[object, ...], int] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, nodes: Iterable[NodeGpus], used: Mapping[DeviceKey, Use]) -> Free:
        free = cls()
        for node in nodes:
            if node.unschedulable:
                continue
            if node.pool == DRA:
                for device in node.devices:
                    key = (device.pool, device.name)
                    taken = used.get(key, Use())
                    free.devices[key] = (device, Use(taken.memory, taken.cores))
            elif node.pool == LEGACY:
                free.slots[node.name] = node.legacy_slots - node.legacy_used
        return free

    def place_dra(
        self, needs: list[list[Need]], skip_node: str = "", skip: Collection[str] = ()
    ) -> str | None:
        """Put one pod's claims on free devices (first fit; the devices of one pod distinct,
        one node) of a node not skipped; the node, or None when they fit nowhere (nothing is
        taken then)."""
        flat = [need for request in needs for need in request]
        skipped = frozenset(skip) | {skip_node}
        # Capacity only shrinks while a plan places pods: a node where these needs did not fit
        # is never tried again for them (a thousand nodes' plan stays linear).
        shape = (tuple(flat), skipped, "dra")
        order = self._dra_order()
        start = self._cursor.get(shape, 0)
        for index in range(start, len(order)):
            node, keys = order[index]
            if node in skipped:
                continue
            chosen: list[tuple[DeviceKey, Need]] = []
            for need in flat:
                taken = {c for c, _ in chosen}
                found = next((k for k in keys if k not in taken and self._fits(k, need)), None)
                if found is None:
                    break
                chosen.append((found, need))
            else:
                for key, need in chosen:
                    device, use = self.devices[key]
                    use.memory += device.memory if need.memory is None else need.memory
                    use.cores += device.cores if need.cores is None else need.cores
                self._cursor[shape] = index
                return node
        self._cursor[shape] = len(order)
        return None

    def _dra_order(self) -> list[tuple[str, list[DeviceKey]]]:
        """The DRA nodes by name, each with its devices (the set of devices never changes)."""
        if self._order is None:
            by_node: dict[str, list[DeviceKey]] = {}
            for key, (device, _) in self.devices.items():
                by_node.setdefault(device.node, []).append(key)
            self._order = sorted(by_node.items())
        return self._order

    def _fits(self, key: DeviceKey, need: Need) -> bool:
        device, use = self.devices[key]
        memory = device.memory if need.memory is None else _round_mib(need.memory)
        cores = device.cores if need.cores is None else need.cores
        return use.memory + memory <= device.memory and use.cores + cores <= device.cores

    def place_legacy(
        self, count: int, skip_node: str = "", skip: Collection[str] = ()
    ) -> str | None:
        """Put a pod of `count` nvidia.com/gpu on a legacy node (not skipped) with as many
        free slots (first fit by name)."""
        skipped = frozenset(skip) | {skip_node}
        shape = ((count,), skipped, "legacy")
        names = sorted(self.slots) if len(self._legacy_order) != len(self.slots) else None
        if names is not None:
            self._legacy_order = names
        order = self._legacy_order
        for index in range(self._cursor.get(shape, 0), len(order)):
            node = order[index]
            left = self.slots[node]
            if node not in skipped and left >= count:
                self.slots[node] = left - count
                self._cursor[shape] = index
                return node
        self._cursor[shape] = len(order)
        return None

    def dra_left(self, node: str) -> Use:
        left = Use()
        for device, use in self.devices.values():
            if device.node == node:
                left.memory += max(0, device.memory - use.memory)
                left.cores += max(0, device.cores - use.cores)
        return left


def _round_mib(size: int) -> int:
    """The driver's memory requestPolicy: step 1 MiB (the scheduler rounds up)."""
    return -(-size // MIB) * MIB


def pod_ready(pod: JsonObject) -> bool:
    """The pod's Ready condition is True (the kubelet's word, from its readiness probe)."""
    return PodView.of(pod).ready
