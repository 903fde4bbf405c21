"""Move one node between the GPU pools (`migrate node`), so that it is never served by both.

The steps, each idempotent; the last one done is kept on the Node (annotation
`hami.io/gpu-pool-move`), so a second run after an interruption resumes there:

1. cordon (remembering whether it was cordoned before);
2. evict, through the Eviction API, every pod that holds what the pool it leaves serves
   (core/migration/holdings.py: the driver's allocated claims, or the device plugin's devices; never
   a label), PodDisruptionBudgets respected (a 429 is retried until the deadline); DaemonSet pods
   are not evicted, but one that holds the leaving side's devices keeps the move from finishing;
3. wait until none of those pods is left on it, and nothing of the side it leaves is held
   there (no claim of the driver allocated on it, a DaemonSet's pod's included: the driver must
   still be there to release them, so the label changes only after);
4. label it `hami.io/gpu-pool=moving` (neither pool: HAMi's device plugin and the DRA driver,
   restricted to their pools, both leave it) and wait until neither serves it and nothing of
   the side it leaves is held there: no `nvidia.com/gpu` allocatable, no ResourceSlice of the
   driver for it, no claim of the driver allocated on it, no pod of the device plugin's;
5. label it with the new pool and wait until that side serves it (the driver's pod Ready and
   its ResourceSlice published, or the device plugin's `nvidia.com/gpu` allocatable again);
   its cards' cordon (hami.io/device-cordon) becomes DeviceTaintRules, or they go (to legacy);
   to DRA, a canary, a converted pod, must then run there (cluster/moves/canary.py);
6. check again that only the new side serves it and nothing of the old side is held there,
   then uncordon (unless it was cordoned before the move) and drop the annotation.

The state on the Node says where to resume, never what is true: cordon, the drain and the
final check run on every run, so a state written by someone else (a node's own identity may
not write it: the chart's node-identity policy) cannot skip them. On any failure the node
stays cordoned. The cluster's claims, read every poll, are watched (cluster/moves/kept_lists.py)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

from hami_dra_webhook.cluster.events import About, event_body, post_event
from hami_dra_webhook.cluster.moves import kept_lists
from hami_dra_webhook.cluster.moves.canary import Canary, driver_pod, driver_words
from hami_dra_webhook.cluster.moves.device_cordons import DeviceCordons, MoveCordons
from hami_dra_webhook.cluster.moves.drain import Drain
from hami_dra_webhook.cluster.moves.kept_lists import KeptList
from hami_dra_webhook.cluster.moves.words import (
    not_served_words,
    served_detail,
    still_served_words,
)
from hami_dra_webhook.core.migration.holdings import (
    ClaimIndex,
    claim_on_node,
    node_pools,
)
from hami_dra_webhook.core.migration.move_state import (
    CALL_TIMEOUT,
    EVENT_COMPONENT,
    MoveError,
    MoveEvents,
    MoveState,
    now,
)
from hami_dra_webhook.core.migration.pool_plan import GpuPod, gpu_pod, leaves
from hami_dra_webhook.core.migration.pools import (
    DRA,
    LEGACY,
    MOVE_ANNOTATION,
    MOVING,
    POOL_LABEL,
    Device,
    node_gpus,
    slice_devices,
)
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.kube.port import ApiError, KubeApi, paths

__all__ = ["MoveError", "MoveState", "NodeMove"]
T = TypeVar("T")


@dataclass
class NodeMove:
    api: KubeApi
    policy: Policy
    node: str
    to: str
    events: MoveEvents
    timeout: float = 600.0
    poll: float = 1.0
    canary: bool = True  # a converted pod runs on it before a move to DRA gives it back
    release: str = "hami-dra-webhook"  # the chart whose driver serves the DRA pool
    claims: KeptList | None = None  # the cluster's claims, watched (a wave's moves share one)

    def __post_init__(self) -> None:
        self._deadline = time.monotonic() + self.timeout
        self._uid = ""  # the Node's, for its Events
        self._state_now: MoveState | None = None

    async def run(self) -> MoveState:
        """The move, to its end; on a failure the node stays cordoned, its state says where
        and why it stopped (a Warning Event on the Node too), and MoveError is raised."""
        if self.claims is None:  # read every second: watched, not listed each time
            async with kept_lists.claims(self.api) as kept:
                self.claims = kept
                try:
                    return await self.run()
                finally:
                    self.claims = None
        try:
            return await self._run()
        except MoveError as error:
            await self._stopped(str(error))
            raise

    async def _stopped(self, why: str) -> None:
        state = self._state_now
        if state is not None and state.step != "done":
            state.error = why
            # the API failed: the state keeps its last step, without the reason
            with contextlib.suppress(MoveError):
                await self._patch({}, state, state.step)
        await self._event("failed", why, "Warning")

    async def _tell(self, step: str, detail: str) -> None:
        """A step: on the terminal (the caller's display) and as an Event on the Node."""
        self.events.step(step, detail)
        await self._event(step, detail, "Normal")

    async def _event(self, step: str, detail: str, kind: Literal["Normal", "Warning"]) -> None:
        reason = "GpuPoolMove" + step[:1].upper() + step[1:]
        body = event_body(
            About("Node", self.node, self._uid),
            reason,
            f"to the {self.to} pool: {detail}",
            kind,
            EVENT_COMPONENT,
        )
        await post_event(self.api, body, CALL_TIMEOUT)

    async def _run(self) -> MoveState:
        await self._cordons().carriable(await self._node())  # before anything changes
        state = await self._state()
        self._state_now = state
        if state.step == "done":
            await self._carry_cordons()  # a node already moved: its rules follow the annotation
            await self._tell("done", f"{self.node} is already in the {self.to} pool")
            return state
        if not state.done("cordoned"):
            await self._patch({"spec": {"unschedulable": True}}, state, "cordoned")
            await self._tell("cordoned", f"{self.node} cordoned")
        else:  # resumed: cordoned again whatever happened since (idempotent)
            await self._patch({"spec": {"unschedulable": True}}, state, state.step)
        await self._drain(state.origin)  # every run: a resumed state is not evidence
        # Before the label changes: the side it leaves must still be there to release what
        # is held (a pod with a claim cannot end on a node its driver has left: the kubelet
        # waits for the driver to unprepare the claim).
        await self._until(
            self._released, f"nothing of the {state.origin} side held on {self.node}", self._held
        )
        if not state.done("drained"):
            await self._patch({}, state, "drained")
        if not state.done("unserved"):
            await self._label(MOVING)
            await self._tell("relabelled", f"{POOL_LABEL}={MOVING}: in neither pool")
            await self._until(
                self._unserved, f"neither side serving {self.node}", self._still_served
            )
            await self._patch({}, state, "unserved")
            await self._tell("unserved", "neither the device plugin nor the driver serves it")
        if not state.done("served"):
            await self._label(self.to)
            await self._tell("relabelled", f"{POOL_LABEL}={self.to}")
            await self._until(
                self._served, f"the {self.to} side serving {self.node}", self._not_served
            )
            await self._patch({}, state, "served")
            await self._tell("served", served_detail(self.to))
        await self._carry_cordons()  # every run: idempotent
        if self.to == DRA and self.canary:  # every run: a resumed state is not evidence
            await self._tell("canary", f"a converted pod on {self.node} before it is given back")
            canary = Canary(self.api, self.policy, self.node, self._deadline, self.poll)
            canary.release = self.release
            await self._tell("canaryPassed", await canary.run())
        await self._check_clear()
        patch: JsonObject = {"metadata": {"annotations": {MOVE_ANNOTATION: None}}}
        if state.cordoned_by_move:
            patch["spec"] = {"unschedulable": None}
        await self._call(self.api.patch_node(self.node, patch, timeout=CALL_TIMEOUT))
        state.step = "done"
        await self._tell(
            "done",
            f"{self.node} is in the {self.to} pool"
            + (", uncordoned" if state.cordoned_by_move else ""),
        )
        return state

    async def _check_clear(self) -> None:
        """Before the node is given back: only the new side serves it, nothing of the old side
        held there; else the move stops, the node cordoned."""
        served, held = await self._served_by(), await self._held_here()
        if served == (self.to,) and not held:
            return
        problems = []
        if served != (self.to,):
            problems.append(f"served by {', '.join(served) or 'neither side'}")
        problems += held
        raise MoveError(
            f"{self.node} is not ready for the {self.to} pool: {'; '.join(problems)}."
            " It stays cordoned; fix that and run the move again, or move it back with"
            f" migrate node {self.node} --to {LEGACY if self.to == DRA else DRA}"
        )

    def _cordons(self) -> MoveCordons:
        return MoveCordons(DeviceCordons(self.api, self.policy, self.node, CALL_TIMEOUT), self.to)

    async def _carry_cordons(self) -> None:
        said = await self._cordons().carry(await self._node())
        if said:
            await self._tell(*said)

    # -- the state on the Node ------------------------------------------------------------

    async def _node(self) -> JsonObject:
        node = await self._call(self.api.get_path(paths.node(self.node), timeout=CALL_TIMEOUT))
        self._uid = str((node.get("metadata") or {}).get("uid") or self._uid)
        return node

    async def _state(self) -> MoveState:
        node = await self._node()
        metadata = node.get("metadata") or {}
        text = (metadata.get("annotations") or {}).get(MOVE_ANNOTATION)
        if text:
            state = MoveState.decode(str(text))
            if state is None:
                raise MoveError(
                    f"{self.node}'s annotation {MOVE_ANNOTATION} is not a move's state: remove it"
                    f" (kubectl annotate node {self.node} {MOVE_ANNOTATION}-) and run again",
                    resumable=False,
                )
            if state.to != self.to:
                raise MoveError(
                    f"a move of {self.node} to {state.to} is in progress (step {state.step});"
                    f" finish it first: migrate node {self.node} --to {state.to}",
                    resumable=False,
                )
            await self._tell(
                "resumed", f"a move to {self.to} stopped after step {state.step}: resuming"
            )
            if state.step == "done":  # never written by a move: the end is checked, not read
                state.step = "served"
            return state
        gpus = node_gpus(node, self.policy.legacy_resource_names.gpus, await self._devices())
        label = gpus.label
        if label == self.to and gpus.served_by == (self.to,) and not await self._held_here():
            return MoveState(self.to, label, "done", False)
        origin = gpus.pool or label
        if origin in ("", self.to):  # in the pool already, but the other side holds devices
            origin = LEGACY if self.to == DRA else DRA
        state = MoveState(self.to, origin, "started", not gpus.unschedulable)
        await self._patch({}, state, "started")
        await self._tell(
            "started", f"moving {self.node} from the {origin} pool to the {self.to} pool"
        )
        return state

    async def _patch(self, patch: JsonObject, state: MoveState, step: str) -> None:
        if step != state.step:
            state.error = ""  # a step done: the last stop's reason is history
        state.step = step
        state.updated_at = now()
        state.started_at = state.started_at or state.updated_at
        merged = {**patch, "metadata": {"annotations": {MOVE_ANNOTATION: state.encode()}}}
        await self._call(self.api.patch_node(self.node, merged, timeout=CALL_TIMEOUT))

    async def _label(self, value: str) -> None:
        patch = {"metadata": {"labels": {POOL_LABEL: value}}}
        await self._call(self.api.patch_node(self.node, patch, timeout=CALL_TIMEOUT))

    # -- draining -------------------------------------------------------------------------

    async def _holders(self) -> tuple[list[GpuPod], ClaimIndex, list[JsonObject]]:
        """The GPU pods on the node that hold what the pool it leaves serves, the driver's
        allocated claims, and every pod bound to the node."""
        query = [("fieldSelector", f"spec.nodeName={self.node}")]
        pods = await self._call(self.api.list_path(paths.ALL_PODS, query, timeout=CALL_TIMEOUT))
        assert self.claims is not None  # run() keeps them
        listed = await self._call(self.claims.items(CALL_TIMEOUT))
        claims = ClaimIndex.of(listed, self.policy.webhook.driver_name)
        found = (gpu_pod(pod, self.policy, claims) for pod in pods)
        return [p for p in found if p is not None and leaves(p, self.to)], claims, pods

    async def _leaving_pods(self) -> list[JsonObject]:
        holders, _, _ = await self._holders()
        return [p.pod for p in holders if not p.daemon]

    async def _held_here(self) -> list[str]:
        """What the side the node leaves still holds on it, in words ([] for nothing): the
        driver's claims allocated there (whoever holds them), or pods of the device plugin."""
        holders, claims, pods = await self._holders()
        said = [
            f"{'DaemonSet ' if p.daemon else ''}pod {p.namespace}/{p.name} holds"
            f" {'the driver' if self.to == LEGACY else 'the device plugin'}'s devices"
            for p in holders
        ]
        if self.to == LEGACY:
            pools = node_pools(self.node, {d.pool for d in await self._devices()})
            pod_nodes = {
                str(p["metadata"].get("uid")): str((p.get("spec") or {}).get("nodeName"))
                for p in pods
            }
            driver = self.policy.webhook.driver_name
            said += [
                f"claim {claim.words()} is allocated on it"
                for claim in claims.by_name.values()
                if claim_on_node(claim, self.node, pools, pod_nodes, driver)
            ]
        return said

    async def _drain(self, origin: str) -> None:
        drain = Drain(self.api, self.node, self.to, self._leaving_pods, self._tell, self.poll)
        await drain.run(origin, self._check_deadline)

    # -- serving --------------------------------------------------------------------------

    async def _devices(self) -> list[Device]:
        slices = await self._call(
            self.api.list_resource_slices(self.policy.webhook.driver_name, timeout=CALL_TIMEOUT)
        )
        return [
            device
            for resource_slice in slices
            for device in slice_devices(resource_slice)
            if device.node == self.node
        ]

    async def _served_by(self) -> tuple[str, ...]:
        node = await self._node()
        return node_gpus(
            node, self.policy.legacy_resource_names.gpus, await self._devices()
        ).served_by

    async def _released(self) -> bool:
        return not await self._held_here()

    async def _held(self) -> str:
        held = await self._held_here()
        hint = (
            " (a DaemonSet's pod is not evicted: keep the DaemonSet off the pool the node leaves,"
            " or delete the pod)"
        )
        node = await self._node()
        if ((node.get("metadata") or {}).get("labels") or {}).get(POOL_LABEL) == MOVING:
            back = LEGACY if self.to == DRA else DRA
            hint += (
                f"; {self.node} is labelled {MOVING}: the side it left cannot release what is"
                f" held there until it is back (migrate node {self.node} --to {back})"
            )
        return "; ".join(held[:5]) + hint

    async def _unserved(self) -> bool:
        return not await self._served_by() and not await self._held_here()

    async def _served(self) -> bool:
        if await self._served_by() != (self.to,):
            return False
        return self.to != DRA or not driver_words(await self._driver(), self.node, self.release)

    async def _driver(self) -> JsonObject | None:
        return await self._call(driver_pod(self.api, self.node, self.release))

    async def _still_served(self) -> str:
        served, held = await self._served_by(), await self._held_here()
        if held and not served:
            return await self._held()
        return still_served_words(served, held)

    async def _not_served(self) -> str:
        served = await self._served_by()
        driver = await self._driver() if self.to == DRA else None
        return not_served_words(self.to, self.node, self.release, served, driver)

    async def _until(
        self, check: Callable[[], Awaitable[bool]], what: str, why_not: Callable[[], Awaitable[str]]
    ) -> None:
        while not await check():
            if time.monotonic() > self._deadline:
                raise MoveError(f"timed out waiting for {what}: {await why_not()}")
            await asyncio.sleep(self.poll)

    def _check_deadline(self, what: str) -> None:
        if time.monotonic() > self._deadline:
            raise MoveError(f"timed out draining: {what}")

    async def _call(self, call: Awaitable[T]) -> T:
        try:
            return await call
        except ApiError as error:
            raise MoveError(f"the Kubernetes API failed: {error}") from error
