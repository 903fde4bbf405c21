"""Step 2 of a node move (cluster/moves/node.py): evict, through the Eviction API, every pod
that holds what the pool the node leaves serves, until none is left. PodDisruptionBudgets are
respected: a refused eviction (429) is said once and tried again each round, until the move's
deadline. Each evicted pod gets a `GpuPoolMoveEvicted` Event that says why."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from hami_dra_webhook.cluster.events import About, event_body, post_event
from hami_dra_webhook.core.migration.move_state import CALL_TIMEOUT, EVENT_COMPONENT, MoveError
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.kube.port import ApiError, KubeApi


@dataclass
class Drain:
    api: KubeApi
    node: str
    to: str
    leaving: Callable[[], Awaitable[list[JsonObject]]]  # the pods still to evict
    tell: Callable[[str, str], Awaitable[None]]  # a step, on the terminal and the Node
    poll: float = 1.0
    evicted: set[str] = field(default_factory=set)
    refused: set[str] = field(default_factory=set)  # refusals said already

    async def run(self, origin: str, check_deadline: Callable[[str], None]) -> None:
        while True:
            pods = await self.leaving()
            if not pods:
                await self.tell("drained", f"no {origin} GPU pod left on {self.node}")
                return
            for pod in pods:
                await self._evict(pod)
            check_deadline(
                f"{len(pods)} GPU pod(s) still on {self.node}: "
                + ", ".join(
                    f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pods[:5]
                )
            )
            await asyncio.sleep(self.poll)

    async def _evict(self, pod: JsonObject) -> None:
        metadata = pod["metadata"]
        key = f"{metadata['namespace']}/{metadata['name']}"
        if metadata.get("deletionTimestamp") or key in self.evicted:
            return
        try:
            await self.api.evict(metadata["namespace"], metadata["name"], timeout=CALL_TIMEOUT)
        except ApiError as error:
            if error.status == 404:
                return
            if error.status == 429:
                if key not in self.refused:
                    self.refused.add(key)
                    await self.tell(
                        "waiting", f"eviction of {key} refused for now: {error.message}"
                    )
                return
            raise MoveError(f"evicting {key}: {error}") from error
        self.evicted.add(key)
        await self.tell("evicted", key)
        about = About("Pod", metadata["name"], metadata.get("uid", ""), metadata["namespace"])
        message = (
            f"evicted by migrate: its node {self.node} moves to the {self.to} GPU pool;"
            " its controller re-creates it elsewhere"
        )
        body = event_body(about, "GpuPoolMoveEvicted", message, "Normal", EVENT_COMPONENT)
        await post_event(self.api, body, CALL_TIMEOUT)
