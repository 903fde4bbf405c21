"""Which nodes a fleet move takes (`migrate wave`), in which order and in which waves. No I/O.

- A node already in the target pool (labelled and served by that side only, no move under way)
  is skipped; a node whose move to the other pool is under way is an error (finish it first).
- Nodes whose move to the target pool stopped part-way (their state is on the Node) go first,
  so a second run resumes where the first stopped.
- Then, unless a stopped move is resumed, a canary: one node alone in the first wave (the one
  named, else the one with the fewest GPU pods to move), so that a driver that does not serve
  moved nodes stops the fleet after one node.
- Then the rest, by name, in waves of at most `batch` nodes and at most `max_unavailable` nodes
  or GPUs (a node's GPUs: the driver's devices on it, else its `nvidia.com/gpu.count` label,
  else its allocatable `nvidia.com/gpu`, the device plugin's virtual devices).

What each wave evicts is planned again just before it starts, on the cluster as it is then
(core/migration/pool_plan.plan_move with every node of the wave left out as a destination).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from hami_dra_webhook.core.migration.move_state import MoveState
from hami_dra_webhook.core.migration.pool_plan import Inventory, leaves
from hami_dra_webhook.core.migration.pools import DRA, LEGACY, NodeGpus

GPU_COUNT_LABEL = "nvidia.com/gpu.count"  # GPU feature discovery's


@dataclass(frozen=True, slots=True)
class MaxUnavailable:
    """How much a wave may take out of service at once: nodes, or GPUs (None: no limit)."""

    nodes: int | None = None
    gpus: int | None = None

    def words(self) -> str:
        if self.gpus is not None:
            return f"{self.gpus} GPUs"
        return "no limit" if self.nodes is None else f"{self.nodes} nodes"


def parse_max_unavailable(text: str) -> MaxUnavailable:
    """`3` (nodes) or `16gpus` (GPUs); ValueError with what to write otherwise."""
    found = re.fullmatch(r"\s*(\d{1,6})\s*(gpus?|nodes?)?\s*", text, re.IGNORECASE)
    if not found or int(found.group(1)) < 1:
        raise ValueError(
            f"--max-unavailable {text!r}: give a number of nodes (3) or of GPUs (16gpus), 1 or more"
        )
    amount, unit = int(found.group(1)), (found.group(2) or "nodes").lower()
    return MaxUnavailable(gpus=amount) if unit.startswith("gpu") else MaxUnavailable(nodes=amount)


def node_gpu_count(node: NodeGpus) -> int:
    if node.devices:
        return len(node.devices)
    try:
        return max(0, int(node.labels.get(GPU_COUNT_LABEL, "")))
    except ValueError:
        return node.legacy_slots


@dataclass(frozen=True, slots=True)
class Candidate:
    name: str
    gpus: int
    pods: int  # GPU pods on it that the move evicts
    resuming: bool  # a move of it to the same pool stopped part-way


@dataclass
class FleetPlan:
    to: str
    waves: list[list[str]] = field(default_factory=list)
    canary: str = ""  # "" when there is none (resumed, or nothing of the set to test first)
    gpus: dict[str, int] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (node, why)
    errors: list[str] = field(default_factory=list)  # nothing starts while there are any

    def as_json(self) -> dict[str, object]:
        return {
            "to": self.to,
            "canary": self.canary,
            "waves": [
                {"nodes": wave, "gpus": sum(self.gpus[n] for n in wave)} for wave in self.waves
            ],
            "skipped": [{"node": node, "why": why} for node, why in self.skipped],
            "errors": self.errors,
        }


def select(
    inventory: Inventory, names: Iterable[str], to: str
) -> tuple[list[Candidate], list[tuple[str, str]], list[str]]:
    """The nodes named that a move to `to` takes (candidates), those it skips with why, and
    what keeps the fleet from starting."""
    candidates, skipped, errors = [], [], []
    for name in dict.fromkeys(names):
        node = inventory.nodes.get(name)
        if node is None:
            errors.append(f"no node named {name}")
            continue
        state = MoveState.decode(node.move) if node.move else None
        if node.move and state is None:
            errors.append(f"{name}: its move state is not readable: remove the annotation")
            continue
        if state is not None and state.to != to:
            errors.append(
                f"{name}: a move to {state.to} is under way (step {state.step}); finish it"
                f" first: migrate node {name} --to {state.to}"
            )
            continue
        if state is None and node.label == to and node.served_by == (to,):
            skipped.append((name, f"already in the {to} pool"))
            continue
        if state is None and not node.gpu_node:
            skipped.append((name, "not a GPU node (no GPU label, served by neither side)"))
            continue
        pods = sum(1 for p in inventory.on(name) if leaves(p, to) and not p.daemon)
        candidates.append(Candidate(name, node_gpu_count(node), pods, state is not None))
    return candidates, skipped, errors


def plan_fleet(
    inventory: Inventory,
    names: Iterable[str],
    to: str,
    batch: int,
    limit: MaxUnavailable,
    canary: str | None = None,
    with_canary: bool = True,
) -> FleetPlan:
    """The waves of a move of the nodes named to pool `to`."""
    if to not in (DRA, LEGACY):
        raise ValueError(f"no pool {to!r}")
    candidates, skipped, errors = select(inventory, names, to)
    plan = FleetPlan(to, skipped=skipped, errors=errors)
    plan.gpus = {c.name: c.gpus for c in candidates}
    if canary and canary not in plan.gpus:
        plan.errors.append(f"--canary {canary}: not among the nodes this move takes")
    for candidate in candidates:
        if limit.gpus is not None and candidate.gpus > limit.gpus:
            plan.errors.append(
                f"{candidate.name} has {candidate.gpus} GPUs, more than --max-unavailable"
                f" {limit.words()}: raise it"
            )
    if plan.errors:
        return plan
    resuming = sorted((c for c in candidates if c.resuming), key=lambda c: c.name)
    rest = sorted((c for c in candidates if not c.resuming), key=lambda c: c.name)
    if with_canary and rest and not resuming:
        first = (
            next(c for c in rest if c.name == canary)
            if canary
            else min(rest, key=lambda c: (c.pods, c.name))
        )
        plan.canary = first.name
        rest.remove(first)
        plan.waves.append([first.name])
    plan.waves = _waves(resuming, batch, limit) + plan.waves + _waves(rest, batch, limit)
    return plan


def _waves(nodes: list[Candidate], batch: int, limit: MaxUnavailable) -> list[list[str]]:
    most = min(batch, limit.nodes) if limit.nodes is not None else batch
    waves: list[list[str]] = []
    wave: list[str] = []
    gpus = 0
    for node in nodes:
        over = limit.gpus is not None and gpus + node.gpus > limit.gpus
        if wave and (len(wave) >= most or over):
            waves.append(wave)
            wave, gpus = [], 0
        wave.append(node.name)
        gpus += node.gpus
    if wave:
        waves.append(wave)
    return waves
