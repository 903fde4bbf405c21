"""`migrate status`'s report: per pool its nodes, GPUs and free capacity; per namespace its
legacy and converted pods, and what keeps each legacy pod from moving to DRA (as data for
--output json|yaml, and as text)."""

from __future__ import annotations

from typing import Any

from hami_dra_webhook.cli.inputs import table
from hami_dra_webhook.core.migration.pool_plan import destination
from hami_dra_webhook.core.migration.pools import DRA, LEGACY
from hami_dra_webhook.core.model.quantity import MIB
from hami_dra_webhook.core.translate.lints import sm_limit_note


def status_report(inventory: Any, policy: Any) -> dict[str, Any]:
    pools: dict[str, dict[str, Any]] = {
        LEGACY: {"nodes": 0, "slots": 0, "slotsUsed": 0, "pods": 0},
        DRA: {"nodes": 0, "devices": 0, "memory": 0, "memoryFree": 0, "coresFree": 0, "pods": 0},
    }
    free = inventory.free()
    nodes = [
        _node_row(node, pools, free)
        for node in sorted(inventory.nodes.values(), key=lambda n: n.name)
        if node.gpu_node
    ]
    return {
        "scope": inventory.scope.mode,
        "pools": {
            LEGACY: pools[LEGACY]
            | {"slotsFree": pools[LEGACY]["slots"] - pools[LEGACY]["slotsUsed"]},
            DRA: pools[DRA]
            | {
                "memoryMiB": pools[DRA]["memory"] // MIB,
                "memoryFreeMiB": pools[DRA]["memoryFree"] // MIB,
            },
        },
        "nodes": nodes,
        "namespaces": _namespaces(inventory, policy),
    }


def _node_row(node: Any, pools: dict[str, dict[str, Any]], free: Any) -> dict[str, Any]:
    """The node's row; its pool's totals counted in `pools`."""
    row: dict[str, Any] = {
        "node": node.name,
        "label": node.label,
        "pool": node.pool,
        "servedBy": list(node.served_by),
        "cordoned": node.unschedulable,
        "pods": node.pods,
    }
    if node.pool == LEGACY:
        entry = pools[LEGACY]
        entry["slots"] += node.legacy_slots
        entry["slotsUsed"] += node.legacy_used
        row |= {"slots": node.legacy_slots, "slotsUsed": node.legacy_used}
    elif node.pool == DRA:
        entry = pools[DRA]
        left = free.dra_left(node.name) if not node.unschedulable else None
        memory = sum(d.memory for d in node.devices)
        entry["devices"] += len(node.devices)
        entry["memory"] += memory
        if left is not None:
            entry["memoryFree"] += left.memory
            entry["coresFree"] += left.cores
        row |= {
            "devices": len(node.devices),
            "memoryMiB": memory // MIB,
            "memoryFreeMiB": None if left is None else left.memory // MIB,
        }
    else:
        return row
    entry["nodes"] += 1
    entry["pods"] += node.pods
    return row


def _namespaces(inventory: Any, policy: Any) -> dict[str, dict[str, Any]]:
    namespaces: dict[str, dict[str, Any]] = {}
    moves = inventory.free()
    for pod in sorted(inventory.pods, key=lambda p: (p.namespace, p.name)):
        entry = namespaces.setdefault(
            pod.namespace,
            {
                "inScope": inventory.scope.converts(
                    inventory.namespace_labels.get(pod.namespace, {}), {}
                )
                if inventory.scope.mode != "workloads"
                else None,
                "legacy": 0,
                "converted": 0,
                "legacyPods": [],
            },
        )
        entry[pod.side] += 1
        if pod.side == "legacy":
            entry["legacyPods"].append(
                {
                    "pod": pod.name,
                    "node": pod.node,
                    "blocker": _blocker(pod, inventory, moves, policy),
                    "note": sm_limit_note(pod.pod, policy),
                }
            )
    return namespaces


def _blocker(pod: Any, inventory: Any, free: Any, policy: Any) -> str:
    """What keeps a legacy pod from moving to DRA now; "" when nothing does."""
    if not inventory.in_scope(pod):
        if inventory.scope.mode == "namespaces":
            return "namespace not in the scope: label it hami.io/gpu-migration=dra"
        return "not in the scope: label its pod template hami.io/gpu-migration=dra"
    goes, fits = destination(pod, inventory, free, policy, skip="")
    if not fits:
        return goes
    if not pod.owner:
        return "a bare pod: re-create it yourself (deleting it loses it)"
    return "" if goes.startswith("converted") else goes


def status_text(report: dict[str, Any]) -> str:
    lines = [f"migration scope: {report['scope']}", ""]
    lines += _pools_table(report["pools"])
    lines.append("")
    lines += table(
        ["NODE", "POOL", "LABEL", "SERVED BY", "CORDONED", "GPU PODS"],
        [
            [
                node["node"],
                node["pool"] or "NONE",
                node["label"] or "-",
                ",".join(node["servedBy"]) or "-",
                "yes" if node["cordoned"] else "no",
                str(node["pods"]),
            ]
            for node in report["nodes"]
        ],
    )
    lines.append("")
    lines += table(
        ["NAMESPACE", "IN SCOPE", "LEGACY PODS", "CONVERTED PODS"],
        [
            [
                name,
                {True: "yes", False: "no", None: "per pod"}[e["inScope"]],
                str(e["legacy"]),
                str(e["converted"]),
            ]
            for name, e in sorted(report["namespaces"].items())
        ],
    )
    quotas = report.get("quotas") or []
    if quotas:
        lines += ["", "GPU quotas (converted and legacy pods together; docs/quotas.md):"]
        lines += table(
            ["NAMESPACE", "QUOTA", "KEY", "USED", "HARD", "HELD PODS"],
            [
                [
                    q["namespace"],
                    q["quota"],
                    q["key"],
                    "unknown" if q["used"] is None else str(q["used"]),
                    str(q["hard"]),
                    str(q["heldPods"]),
                ]
                for q in quotas
            ],
        )
    lines += _legacy_pods(report["namespaces"])
    return "\n".join(lines) + "\n"


def _legacy_pods(namespaces: dict[str, Any]) -> list[str]:
    blocked = [
        (name, pod) for name, entry in sorted(namespaces.items()) for pod in entry["legacyPods"]
    ]
    if not blocked:
        return []
    lines = ["", "legacy pods and what keeps them from moving to DRA:"]
    for name, pod in blocked:
        what = pod["blocker"] or "nothing: it converts on its next creation"
        lines.append(f"  {name}/{pod['pod']}: {what}")
        if pod.get("note"):
            lines.append(f"    note: {pod['note']}")
    return lines


def _pools_table(pools: dict[str, dict[str, Any]]) -> list[str]:
    legacy, dra = pools[LEGACY], pools[DRA]
    used = dra["memoryMiB"] - dra["memoryFreeMiB"]
    return table(
        ["POOL", "NODES", "GPUS", "USED", "FREE", "GPU PODS"],
        [
            [
                "legacy",
                str(legacy["nodes"]),
                f"{legacy['slots']} nvidia.com/gpu",
                f"{legacy['slotsUsed']} nvidia.com/gpu",
                f"{legacy['slotsFree']} nvidia.com/gpu",
                str(legacy["pods"]),
            ],
            [
                "dra",
                str(dra["nodes"]),
                f"{dra['devices']} devices, {dra['memoryMiB']} MiB",
                f"{used} MiB",
                f"{dra['memoryFreeMiB']} MiB, {dra['coresFree']} cores",
                str(dra["pods"]),
            ],
        ],
    )
