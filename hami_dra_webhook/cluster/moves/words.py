"""What a node move says while it waits for a side to serve the node, or to stop serving it
(cluster/moves/node.py)."""

from __future__ import annotations

from hami_dra_webhook.cluster.moves.canary import driver_words
from hami_dra_webhook.core.migration.pools import DRA, LEGACY, POOL_LABEL
from hami_dra_webhook.core.model.types import JsonObject


def still_served_words(served: tuple[str, ...], held: list[str]) -> str:
    """Why the node is still served by a side it should have left."""
    hints = {
        LEGACY: "nvidia.com/gpu is still allocatable: HAMi's device plugin still runs there;"
        f" restrict its DaemonSet to {POOL_LABEL}={LEGACY} (docs/migration.md)",
        DRA: "the driver's ResourceSlice is still published: is its DaemonSet restricted to"
        f" {POOL_LABEL}={DRA} (chart value migration.scope, docs/migration.md)?",
    }
    return "; ".join([*(hints[side] for side in served), *held[:5]])


def not_served_words(
    to: str, node: str, release: str, served: tuple[str, ...], driver: JsonObject | None
) -> str:
    """Why the side the node moves to does not serve it yet."""
    if to in served and len(served) > 1:
        return f"served by both pools: {', '.join(served)}"
    if to == DRA:
        words = [driver_words(driver, node, release)]
        if served != (DRA,):
            words.insert(0, "no ResourceSlice of the driver for it yet")
        return "; ".join(w for w in words if w)
    return "no nvidia.com/gpu allocatable yet: is HAMi's device plugin running there?"


def served_detail(to: str) -> str:
    if to == DRA:
        return "the driver's pod is Ready and publishes its devices"
    return "the device plugin advertises nvidia.com/gpu"
