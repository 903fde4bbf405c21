"""A fleet moved wave by wave (`migrate wave`): before each wave its evictions are planned on
the cluster as it is then (every node of the wave left out as a destination); a wave whose
pods would be lost or fit nowhere stops the fleet before it starts (unless forced); the nodes
of a wave move together (cluster/moves/node.py, each fail-closed and resumable), and the first
wave with a failed move stops the fleet. The state of each move is on its Node, so running the
same command again resumes: nodes already moved are skipped, stopped ones go first."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from hami_dra_webhook.cluster.moves import kept_lists
from hami_dra_webhook.cluster.moves.inventory import read_inventory
from hami_dra_webhook.cluster.moves.kept_lists import KeptList
from hami_dra_webhook.cluster.moves.node import NodeMove
from hami_dra_webhook.core.migration.move_state import CALL_TIMEOUT, MoveError
from hami_dra_webhook.core.migration.pool_plan import Step, plan_move
from hami_dra_webhook.core.migration.pools import Scope
from hami_dra_webhook.core.migration.wave_pacing import waiting_pods
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.kube.port import ApiError, KubeApi, paths


class FleetEvents(Protocol):
    def step(self, name: str, detail: str) -> None: ...

    def wave(self, index: int, total: int, nodes: list[str]) -> None: ...

    def node(self, name: str) -> Any:  # the node's own MoveEvents
        ...


@dataclass
class WaveOutcome:
    nodes: list[str]
    plan: list[Step] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # node -> why its move stopped
    refused: bool = False  # its plan had blockers: nothing of it started

    def as_json(self) -> dict[str, object]:
        return {
            "nodes": self.nodes,
            "plan": [s.as_json() for s in self.plan],
            "moved": self.moved,
            "failed": self.failed,
            "refused": self.refused,
        }


@dataclass
class FleetMove:
    api: KubeApi
    policy: Policy
    scope: Scope
    to: str
    waves: list[list[str]]
    events: FleetEvents
    timeout: float = 600.0  # each node's move
    force: bool = False
    canary_pod: bool = True  # NodeMove.canary
    settle: float = 300.0  # the most to wait, between waves, for the claims of evicted pods
    poll: float = 2.0
    release: str = "hami-dra-webhook"  # NodeMove.release
    outcomes: list[WaveOutcome] = field(default_factory=list)
    # Read every poll by each node's move and between waves: watched, not listed each time.
    _claims: KeptList | None = None
    _pending: KeptList | None = None

    async def run(self) -> bool:
        """Every wave in turn; whether all of them moved."""
        watched = kept_lists.claims(self.api), kept_lists.pending_pods(self.api)
        async with watched[0] as claims, watched[1] as pending:
            self._claims, self._pending = claims, pending
            try:
                return await self._waves()
            finally:
                self._claims = self._pending = None

    async def _waves(self) -> bool:
        for index, nodes in enumerate(self.waves):
            if index:
                await self._settle()
            self.events.wave(index + 1, len(self.waves), nodes)
            outcome = await self._wave(nodes)
            self.outcomes.append(outcome)
            if outcome.refused or outcome.failed:
                return False
        return True

    async def _settle(self) -> None:
        """Before the next wave: until kube-controller-manager has written the claims of the
        pods the last wave sent back (core/migration/wave_pacing.py), at most `settle` seconds; then
        on, saying how many still wait (they are not lost: only later)."""
        deadline = time.monotonic() + self.settle
        said = False
        while True:
            try:
                if self._pending is not None:
                    pending = await self._pending.items(CALL_TIMEOUT)
                else:
                    query = [("fieldSelector", "status.phase=Pending")]
                    pending = await self.api.list_path(paths.ALL_PODS, query, timeout=CALL_TIMEOUT)
            except ApiError as error:
                raise MoveError(f"the Kubernetes API failed: {error}") from error
            waiting = waiting_pods(pending)
            if not waiting:
                if said:
                    self.events.step("settled", "every evicted pod's claims are written")
                return
            if time.monotonic() > deadline:
                self.events.step(
                    "unsettled",
                    f"{len(waiting)} pod(s) still wait for their claims after {self.settle:.0f} s"
                    f" (e.g. {', '.join(waiting[:3])}): going on; kube-controller-manager's"
                    " --kube-api-qps paces this (docs/migration.md)",
                )
                return
            if not said:
                self.events.step(
                    "settling",
                    f"{len(waiting)} pod(s) wait for kube-controller-manager to write their"
                    " claims before the next wave",
                )
                said = True
            await asyncio.sleep(self.poll)

    async def _wave(self, nodes: list[str]) -> WaveOutcome:
        inventory = await read_inventory(self.api, self.policy, self.scope)
        outcome = WaveOutcome(nodes, plan_move(inventory, nodes, self.to, self.policy))
        blockers = [s for s in outcome.plan if s.blocks]
        self.events.step(
            "planned",
            f"{len(outcome.plan)} GPU pod(s) leave {', '.join(nodes)}; {len(blockers)} blocker(s)",
        )
        if blockers and not self.force:
            outcome.refused = True
            return outcome
        moves = [
            NodeMove(
                self.api,
                self.policy,
                node,
                self.to,
                self.events.node(node),
                timeout=self.timeout,
                canary=self.canary_pod,
                release=self.release,
                claims=self._claims,
            )
            for node in nodes
        ]
        results = await asyncio.gather(*(move.run() for move in moves), return_exceptions=True)
        for node, result in zip(nodes, results, strict=True):
            if isinstance(result, MoveError):
                outcome.failed[node] = str(result)
            elif isinstance(result, BaseException):
                raise result
            else:
                outcome.moved.append(node)
        return outcome
