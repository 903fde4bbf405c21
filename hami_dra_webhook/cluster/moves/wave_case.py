"""The `migrate wave` use case, as admission/ is the webhook's: what the command asks
(`WaveRequest`), one run (`WaveRun.run`: the cluster read and the fleet planned on it, whether
it may start, the move), and how it ended (`Ending`), which the command maps to its exit code
and words. The command parses its flags, shows what the run tells its screen (`WaveScreen`)
and prints the end; it decides nothing of this."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Protocol

from hami_dra_webhook.cluster.moves.fleet import FleetEvents, FleetMove, WaveOutcome
from hami_dra_webhook.cluster.moves.inventory import read_inventory, read_scope
from hami_dra_webhook.cluster.state import cluster_policy
from hami_dra_webhook.core.migration.pool_plan import Inventory, Step, plan_move
from hami_dra_webhook.core.migration.pools import Scope
from hami_dra_webhook.core.migration.wave_pacing import pacing_note
from hami_dra_webhook.core.migration.wave_plan import FleetPlan, MaxUnavailable, plan_fleet
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.kube.port import KubeApi, paths

READ_TIMEOUT = 10.0  # each read of the cluster's facts and inventory
NODES_TIMEOUT = 20.0  # the Nodes a label selector names


class Ending(enum.Enum):
    """How a `migrate wave` ended."""

    BAD_SELECTION = "bad-selection"  # the nodes asked for cannot be planned: nothing starts
    PLANNED = "planned"  # a dry run whose first wave has no blockers: nothing moved
    REFUSED = "refused"  # a wave's plan has blockers: nothing of that wave started
    MOVED = "moved"  # every wave moved
    STOPPED = "stopped"  # a node's move failed: its wave's nodes stay cordoned, resumable


@dataclass(frozen=True)
class WaveRequest:
    """What the command asks: which nodes, to which pool, in which waves, how."""

    to: str
    nodes: tuple[str, ...] = ()
    selector: str = ""  # nodes by label selector, as kubectl reads it
    pool: str = ""  # every GPU node now in this pool
    batch: int = 1
    limit: MaxUnavailable = field(default_factory=MaxUnavailable)
    canary: str | None = None
    with_canary: bool = True
    scope: Scope | None = None  # None: the installed chart's
    release: str = "hami-dra-webhook"
    dry_run: bool = False
    force: bool = False
    timeout: float = 600.0  # each node's move
    settle: float = 300.0  # between waves
    canary_pod: bool = True


@dataclass
class FleetRead:
    """The cluster as the command found it, and the fleet planned on it."""

    policy: Policy  # with the cluster's facts, as every tool judges
    inventory: Inventory
    fleet: FleetPlan
    plans: list[list[Step]]  # each wave's plan on the cluster as it is now

    @property
    def first_blocked(self) -> bool:
        return bool(self.plans) and any(step.blocks for step in self.plans[0])

    def ending_before_move(self, request: WaveRequest) -> Ending | None:
        """How the command ends without moving anything; None: it moves."""
        if self.fleet.errors:
            return Ending.BAD_SELECTION
        if self.first_blocked and (request.dry_run or not request.force):
            return Ending.REFUSED
        return Ending.PLANNED if request.dry_run else None

    def as_json(self) -> dict[str, object]:
        found: dict[str, object] = {"fleet": self.fleet.as_json()}
        found["scope"] = self.inventory.scope.mode
        if not self.fleet.errors:
            found["pacing"] = [pacing_note(plan) for plan in self.plans]
        return found

    def previews(self) -> list[list[dict[str, object]]]:
        return [[step.as_json() for step in plan] for plan in self.plans]


async def read_fleet(api: KubeApi, request: WaveRequest, given: Policy) -> FleetRead:
    """The policy with the cluster's facts, the inventory, the nodes the request selects, and
    the fleet's waves, each planned on the cluster as it is now."""
    policy = await cluster_policy(api, given, READ_TIMEOUT)
    scope = request.scope or await read_scope(api, request.release, READ_TIMEOUT)
    inventory = await read_inventory(api, policy, scope)
    names = list(request.nodes)
    if request.selector:
        query = [("labelSelector", request.selector)]
        found = await api.list_path(paths.NODES, query, timeout=NODES_TIMEOUT)
        names += sorted(str(node["metadata"]["name"]) for node in found)
    if request.pool:
        names += sorted(
            n.name for n in inventory.nodes.values() if n.gpu_node and n.pool == request.pool
        )
    fleet = plan_fleet(
        inventory,
        names,
        request.to,
        request.batch,
        request.limit,
        request.canary,
        with_canary=request.with_canary,
    )
    plans = (
        [] if fleet.errors else [plan_move(inventory, w, request.to, policy) for w in fleet.waves]
    )
    return FleetRead(policy, inventory, fleet, plans)


class WaveScreen(FleetEvents, Protocol):
    """What a run tells as it goes: the plan (and how it ends before moving, if it does),
    then each wave's and each node's steps (FleetEvents)."""

    def planned(self, read: FleetRead, ending: Ending | None) -> None: ...


@dataclass
class WaveRun:
    """One `migrate wave`, as far as it got (kept when the cluster stops answering on the
    way: what was read, and the waves that moved)."""

    request: WaveRequest
    read: FleetRead | None = None
    move: FleetMove | None = None
    ending: Ending | None = None

    @property
    def outcomes(self) -> list[WaveOutcome]:
        return self.move.outcomes if self.move is not None else []

    async def run(self, api: KubeApi, given: Policy, screen: WaveScreen) -> Ending:
        """Read and plan; unless the plan ends it, move the waves; how it ended."""
        self.read = await read_fleet(api, self.request, given)
        ending = self.read.ending_before_move(self.request)
        screen.planned(self.read, ending)
        if ending is None:
            self.move = _fleet_move(api, self.read, self.request, screen)
            await self.move.run()
            ending = ending_of(self.move.outcomes)
        self.ending = ending
        return ending


def _fleet_move(
    api: KubeApi, read: FleetRead, request: WaveRequest, events: FleetEvents
) -> FleetMove:
    return FleetMove(
        api,
        read.policy,
        read.inventory.scope,
        request.to,
        read.fleet.waves,
        events,
        timeout=request.timeout,
        force=request.force,
        canary_pod=request.canary_pod,
        settle=request.settle,
        release=request.release,
    )


def ending_of(outcomes: list[WaveOutcome]) -> Ending:
    """How a move that ran ended, from its last wave."""
    last = outcomes[-1] if outcomes else None
    if last is not None and last.refused:
        return Ending.REFUSED
    if last is not None and last.failed:
        return Ending.STOPPED
    return Ending.MOVED
