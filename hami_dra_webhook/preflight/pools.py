"""`check`'s view of a cluster in migration: the two GPU pools never overlap.

- FAIL: a node served by both HAMi's device plugin (`nvidia.com/gpu` allocatable) and the
  DRA driver (its ResourceSlice), naming the node: the two would promise the same card twice.
- FAIL: HAMi's device plugin DaemonSet not kept off the DRA pool (a DRA node could get it).
- WARN: a GPU node in neither pool, or one whose `hami.io/gpu-pool` label disagrees with what
  serves it.
- PASS otherwise, with a table per pool (report.pools): nodes, GPUs, used, free, pods.
No I/O: the inventory was read with the snapshot.
"""

from __future__ import annotations

from hami_dra_webhook.core.migration.pool_plan import Inventory
from hami_dra_webhook.core.migration.pools import (
    DRA,
    LEGACY,
    MOVING,
    POOL_LABEL,
)
from hami_dra_webhook.core.model import label_selector
from hami_dra_webhook.core.model.quantity import MIB
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.preflight.report import PoolRow, Report

CHECK = "GPU pools"


def judge_pools(inventory: Inventory, report: Report) -> None:
    gpu_nodes = [n for n in sorted(inventory.nodes.values(), key=lambda n: n.name) if n.gpu_node]
    both = [n.name for n in gpu_nodes if len(n.served_by) > 1]
    neither = [n.name for n in gpu_nodes if not n.served_by and n.label not in (*_POOLS, MOVING)]
    mislabelled = [
        f"{n.name} (labelled {n.label or 'nothing'}, served by {n.served_by[0]})"
        for n in gpu_nodes
        if len(n.served_by) == 1 and n.label not in ("", n.served_by[0])
    ]
    if any(n.pool == LEGACY for n in gpu_nodes):
        report.pools = _rows(inventory)  # a cluster in migration: a table per pool
    if both:
        report.add(
            "FAIL",
            CHECK,
            f"served by both HAMi's device plugin and the DRA driver: {', '.join(both)}; the"
            " two promise the same GPUs twice",
            f"move each to one pool: hami-dra-webhook migrate node NODE --to dra|legacy, and keep"
            f" HAMi's device plugin to {POOL_LABEL}={LEGACY} nodes (docs/migration.md)",
        )
    if neither:
        report.add(
            "WARN",
            CHECK,
            f"GPU nodes in neither pool (nothing serves their GPUs): {', '.join(neither)}",
            f"label each {POOL_LABEL}=legacy or {POOL_LABEL}=dra",
        )
    if mislabelled:
        report.add(
            "WARN",
            CHECK,
            f"label and service disagree: {'; '.join(mislabelled)}",
            "move the node with hami-dra-webhook migrate node NODE --to POOL",
        )
    if not (both or neither or mislabelled):
        counts = {pool: sum(1 for n in gpu_nodes if n.pool == pool) for pool in (LEGACY, DRA)}
        report.add(
            "PASS",
            CHECK,
            f"disjoint: {counts[LEGACY]} legacy node(s), {counts[DRA]} DRA node(s),"
            f" no node in both (migration scope: {inventory.scope.mode})",
        )


_POOLS = (LEGACY, DRA)


def _rows(inventory: Inventory) -> list[PoolRow]:
    free = inventory.free()
    rows = []
    for pool in _POOLS:
        members = [n for n in inventory.nodes.values() if n.gpu_node and n.pool == pool]
        pods = sum(n.pods for n in members)
        if pool == LEGACY:
            slots = sum(n.legacy_slots for n in members)
            used = sum(n.legacy_used for n in members)
            rows.append(
                PoolRow(
                    pool,
                    len(members),
                    f"{slots} nvidia.com/gpu",
                    f"{used} nvidia.com/gpu",
                    f"{slots - used} nvidia.com/gpu",
                    pods,
                )
            )
        else:
            devices = sum(len(n.devices) for n in members)
            memory = sum(d.memory for n in members for d in n.devices)
            left = sum(free.dra_left(n.name).memory for n in members if not n.unschedulable)
            rows.append(
                PoolRow(
                    pool,
                    len(members),
                    f"{devices} devices, {memory // MIB} MiB",
                    f"{(memory - left) // MIB} MiB",
                    f"{left // MIB} MiB",
                    pods,
                )
            )
    return rows


def plugin_unrestricted(daemonset: JsonObject) -> bool:
    """Whether HAMi's device plugin DaemonSet could run on a DRA-pool node: a node that its
    nodeSelector picks, labelled `hami.io/gpu-pool=dra`, passes its required node affinity."""
    spec = (((daemonset.get("spec") or {}).get("template") or {}).get("spec")) or {}
    selector = spec.get("nodeSelector") or {}
    if selector.get(POOL_LABEL, DRA) != DRA:
        return False  # its nodeSelector names another pool
    labels = {**selector, POOL_LABEL: DRA}
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = affinity.get("nodeSelectorTerms") or []
    return not terms or any(label_selector.node_term_matches(t, labels) for t in terms)
