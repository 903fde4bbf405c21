"""A node move's state as the Node keeps it (annotation `hami.io/gpu-pool-move`), and what a
move reports: its steps and why it stopped."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Protocol

from hami_dra_webhook.core.migration.pools import DRA, LEGACY
from hami_dra_webhook.core.model import kube_time
from hami_dra_webhook.core.model.node_view import NodeView

STEPS = ("started", "cordoned", "drained", "unserved", "served", "done")
CALL_TIMEOUT = 10.0
MAX_ERROR = 512  # characters of a stopped move's reason kept on the Node
EVENT_COMPONENT = "hami-dra-webhook-migrate"


class MoveError(RuntimeError):
    """The move stopped; the message says why and what to do. `resumable`: run it again."""

    def __init__(self, message: str, resumable: bool = True) -> None:
        super().__init__(message)
        self.resumable = resumable


class MoveEvents(Protocol):
    def step(self, name: str, detail: str) -> None: ...


@dataclass
class MoveState:
    """A move's state, as the Node's annotation keeps it (`kubectl get node NODE -o
    jsonpath='{.metadata.annotations.hami\\.io/gpu-pool-move}'`): where it goes, the last step
    done, when it started and was last written, and why it stopped, if it did."""

    to: str
    origin: str
    step: str
    cordoned_by_move: bool
    started_at: str = ""  # RFC 3339, UTC
    updated_at: str = ""
    error: str = ""  # why the last run stopped ("" while it runs or after a step succeeded)

    def encode(self) -> str:
        data: dict[str, object] = {
            "to": self.to,
            "from": self.origin,
            "step": self.step,
            "cordonedByMove": self.cordoned_by_move,
            "startedAt": self.started_at,
            "updatedAt": self.updated_at,
        }
        if self.error:
            data["error"] = self.error[:MAX_ERROR]
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def decode(cls, text: str) -> MoveState | None:
        try:
            data = json.loads(text)
            state = cls(
                str(data["to"]),
                str(data["from"]),
                str(data["step"]),
                bool(data["cordonedByMove"]),
                str(data.get("startedAt", "")),
                str(data.get("updatedAt", "")),
                str(data.get("error", "")),
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
        return state if state.step in STEPS and state.to in (DRA, LEGACY) else None

    def done(self, step: str) -> bool:
        return STEPS.index(self.step) >= STEPS.index(step)


def now() -> str:
    return kube_time.stamp()


@dataclass(frozen=True, slots=True)
class FleetSummary:
    """The GPU nodes by pool label and the moves under way, as the webhook's metrics show them
    (a move that stopped keeps its state, with its error, until it is run again)."""

    pools: dict[str, int]  # POOL_LABEL value ("" unlabelled GPU node) -> nodes
    steps: dict[str, int]  # the last step done -> moves under way
    oldest_seconds: float  # since the oldest move under way started (0: none)
    stopped: int  # moves whose last run stopped with an error


POOL_VALUES = ("legacy", "dra", "moving", "")


def fleet_summary(nodes: list[dict[str, object]], now_seconds: float) -> FleetSummary:
    """From the Nodes as listed (`now_seconds`: the Unix time now)."""
    from hami_dra_webhook.core.migration.pools import MOVE_ANNOTATION, POOL_LABEL, node_gpus

    pools = dict.fromkeys(POOL_VALUES, 0)
    steps = dict.fromkeys(STEPS[:-1], 0)
    oldest, stopped = 0.0, 0
    for node in map(NodeView.of, nodes):
        if not node.name:
            continue
        label = node.labels.get(POOL_LABEL, "")
        if label or node_gpus(node, "nvidia.com/gpu", []).gpu_node:
            pools[label if label in pools else ""] += 1
        text = node.annotations.get(MOVE_ANNOTATION)
        state = MoveState.decode(text) if text else None
        if state is None or state.step == "done":
            continue
        steps[state.step] = steps.get(state.step, 0) + 1
        stopped += bool(state.error)
        started = _seconds(state.started_at)
        if started is not None:
            oldest = max(oldest, now_seconds - started)
    return FleetSummary(pools, steps, oldest, stopped)


def _seconds(stamp: str) -> float | None:
    return kube_time.seconds_of(stamp)


@dataclass
class MoveWatch:
    """Node moves followed from one cluster check to the next (the webhook's metrics): a move
    seen under way and then gone from a node labelled with a pool has ended (its duration:
    from its startedAt to the check that saw it gone, so up to one check interval long); a
    stop (a state with an error) is counted once per stop, by the step it stopped after."""

    under_way: dict[str, float] = field(default_factory=dict)  # node -> startedAt (Unix)
    stops: set[tuple[str, str]] = field(default_factory=set)  # (node, updatedAt) counted

    def see(
        self, nodes: list[dict[str, object]], now_seconds: float
    ) -> tuple[list[float], list[str]]:
        """The durations of the moves that ended since the last check, and the steps of the
        stops not seen before."""
        from hami_dra_webhook.core.migration.pools import MOVE_ANNOTATION, POOL_LABEL, POOLS

        ended: list[float] = []
        stopped: list[str] = []
        now_under_way: dict[str, float] = {}
        for node in map(NodeView.of, nodes):
            name = node.name
            if not name:
                continue
            text = node.annotations.get(MOVE_ANNOTATION)
            state = MoveState.decode(text) if text else None
            if state is not None and state.step != "done":
                now_under_way[name] = _seconds(state.started_at) or now_seconds
                if state.error and (name, state.updated_at) not in self.stops:
                    self.stops.add((name, state.updated_at))
                    stopped.append(state.step)
                continue
            label = node.labels.get(POOL_LABEL, "")
            if name in self.under_way and label in POOLS:
                ended.append(max(0.0, now_seconds - self.under_way[name]))
        self.under_way = now_under_way
        self.stops = {stop for stop in self.stops if stop[0] in now_under_way}
        return ended, stopped
