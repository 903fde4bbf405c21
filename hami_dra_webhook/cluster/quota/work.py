"""GPU quotas kept for converted pods (issues 47, 62): the state is the cluster's own pods and
claims, and the work is driven by what changes in them.

Every GPU pod created in a namespace whose ResourceQuota names a kept key is held by the
scheduling gate `hami.io/gpu-quota` (added at admission from every replica's QuotaView; the
chart's ValidatingAdmissionPolicy refuses such a pod without it, and lets only this webhook
remove it). One replica at a time (the Lease, renewed on a loop of its own: cluster/quota/lease.py)
releases held pods as they fit. It is told, by watches instead of asking every second:

- of each namespace whose quota changes (the QuotaView);
- of each change to a pod or a ResourceClaim (their metadata, watched across the cluster) in a
  namespace with held pods, where a pod's end or a claim's allocation may free room or a held
  pod may wait for its claims; a pod labelled held (`hami.io/gpu-quota=held`, which the gate
  webhook adds with the gate) puts its namespace among those, until a count of it says which
  of its pods are held (the label is a hint a tenant can write: it costs only its own
  namespace's counts, and never decides what is charged).

Each such namespace is queued (cluster/quota/namespace_queue.py: once, never in two turns at once,
cheapest first) and counted in its turn (cluster/quota/turn.py). When the Lease is taken, and
whenever a watch had to start afresh (its events may have been missed), every quota namespace
and every namespace with a pod labelled held is counted once; every `resync` seconds the held
ones again, as a safety net. Idle, nothing is asked but the Lease's renewal and the watches'
new windows, however many namespaces and pods there are.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from hami_dra_webhook.cluster.quota.lease import Lease
from hami_dra_webhook.cluster.quota.namespace_queue import NamespaceQueue
from hami_dra_webhook.cluster.quota.turn import NamespaceTurn
from hami_dra_webhook.cluster.quota.usage import read_cards
from hami_dra_webhook.cluster.quota.view import QuotaView
from hami_dra_webhook.cluster.watched import Watched
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.quota.gpu_quota import (
    HELD_LABEL,
    HELD_LABEL_VALUE,
    NAMESPACE_LABEL,
    NAMESPACE_LABEL_VALUE,
    Limit,
)
from hami_dra_webhook.core.quota.quota_groups import Cards
from hami_dra_webhook.core.quota.quota_plan import Held, QuotaPass
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.kube.port import ApiError, KubeApi, paths

log = logging.getLogger("hami_dra_webhook.quota")
PARALLEL = 4  # namespaces counted at once
CARDS_AGE = 60.0  # seconds the drivers' device counts and sizes are kept
SYNC_POLL = 0.1  # seconds between looks at whether the quotas' watch stands again


@dataclass
class PassReport:
    namespaces: int = 0
    released: int = 0
    held: list[Held] = field(default_factory=list)
    usage: dict[str, dict[str, int]] = field(default_factory=dict)  # namespace -> key -> used
    limits: dict[str, list[Limit]] = field(default_factory=dict)


@dataclass
class QuotaGate:
    api: KubeApi
    policy: Callable[[], Policy]  # with the cluster's facts (card sizes) when known
    lease: Lease
    view: QuotaView
    # The least time between two counts of one namespace (a burst of events is one count).
    interval: float = 1.0
    resync: float = 600.0  # the namespaces with held pods counted again this often
    timeout: float = 10.0
    observe: Callable[[PassReport], None] = lambda report: None
    turn: NamespaceTurn = field(init=False)
    _queue: NamespaceQueue | None = None  # while this replica holds the Lease
    _held: dict[str, set[str]] = field(default_factory=dict)  # namespace -> pods maybe held
    _labelled: set[str] = field(default_factory=set)  # namespaces with the namespace label
    _counted: dict[str, QuotaPass] = field(default_factory=dict)  # each namespace's last count
    _cards: Cards | None = None
    _cards_of: tuple[Policy | None, float] = (None, float("-inf"))  # the policy read for, when

    def __post_init__(self) -> None:
        self.turn = NamespaceTurn(self.api, lambda: self.lease.held, self.timeout)
        self.view.tell(self._queued)

    async def run(self) -> None:
        """The job: the work while this replica holds the Lease, for ever."""
        await self.lease.lead(self._lead)

    async def run_pass(self) -> PassReport:
        """Every namespace that may need it counted once, now (the first turn of a Lease, and
        a test's or a benchmark's pass)."""
        if not self.view.synced:
            await self.view.refresh()
        await self._prepare()
        namespaces = set(self.view.limits) | self._labelled | set(self._held)
        released = 0
        for namespace in sorted(namespaces, key=lambda n: (self._cost(n), n)):
            released += await self._turn(namespace)
        return self._report(released)

    async def _lead(self) -> None:
        queue = self._queue = NamespaceQueue(self.interval)
        try:
            await self._prepare()
            for namespace in set(self.view.limits) | self._labelled | set(self._held):
                queue.add(namespace)
            pods = self._watch(paths.ALL_PODS, "pods", self._pod_event)
            claims = self._watch(paths.ALL_CLAIMS, "ResourceClaims", self._claim_event)
            async with asyncio.TaskGroup() as group:
                group.create_task(pods.run())
                group.create_task(claims.run())
                group.create_task(self._resync_loop())
                for _ in range(PARALLEL):
                    group.create_task(self._worker(queue))
        finally:
            self._queue = None

    def _watch(self, path: str, name: str, event: Callable[[str, JsonObject], None]) -> Watched:
        return Watched(
            self.api,
            path,
            [],
            name,
            lists=False,
            metadata_only=True,
            on_list=self._missed,
            on_event=event,
        )

    async def _prepare(self) -> None:
        """What a first turn needs: the card sizes, the labelled namespaces, the pods labelled
        held (one list each)."""
        await self._cards_now(self.policy())
        selector = [("labelSelector", NAMESPACE_LABEL)]
        found = await self.api.list_path(paths.NAMESPACES, selector, timeout=self.timeout)
        self._labelled = {str((n.get("metadata") or {}).get("name", "")) for n in found}
        await self._labelled_held()

    async def _labelled_held(self) -> None:
        """Every pod labelled held now, among those maybe held (one list)."""
        selector = [("labelSelector", f"{HELD_LABEL}={HELD_LABEL_VALUE}")]
        async for page in self.api.path_pages(paths.ALL_PODS, selector, timeout=self.timeout):
            for pod in page:
                namespace, name = _named(pod)
                self._held.setdefault(namespace, set()).add(name)

    async def _worker(self, queue: NamespaceQueue) -> None:
        while True:
            # No turn without the quotas: a namespace whose quota the view has not listed yet
            # would count as one without any, and every held pod of it would go.
            while not self.view.synced:
                await asyncio.sleep(SYNC_POLL)
            namespace = await queue.take()
            if not self.view.synced:  # lost while this worker waited: its turn comes later
                queue.done(namespace, 0.0)
                queue.add(namespace)
                continue
            started, released = time.monotonic(), 0
            try:
                released = await self._turn(namespace)
            except ApiError as error:  # this namespace's turn again later; the others go on
                log.warning("namespace %s: the GPU quota work failed: %s", namespace, error)
                queue.add(namespace)
            finally:
                queue.done(namespace, time.monotonic() - started)
            self.observe(self._report(released))

    async def _turn(self, namespace: str) -> int:
        """The namespace's turn; how many pods it released."""
        released = 0
        limits = self.view.limits.get(namespace, [])
        if limits and namespace not in self._labelled:
            await self.turn.label(namespace, NAMESPACE_LABEL_VALUE)
            self._labelled.add(namespace)
        if limits or self._held.get(namespace):
            policy = self.policy()
            done = await self.turn.count(namespace, limits, policy, await self._cards_now(policy))
            released = len(done.release)
            held = {h.name for h in done.held}
            if held:
                self._held[namespace] = held
            else:
                self._held.pop(namespace, None)
            if limits:
                self._counted[namespace] = done
            else:
                self._counted.pop(namespace, None)
        if not limits and namespace in self._labelled:
            await self.turn.label(namespace, None)  # its held pods were released just now
            self._labelled.discard(namespace)
        return released

    async def _resync_loop(self) -> None:
        while True:
            await asyncio.sleep(self.resync)
            await self._labelled_held()  # one a watch could have missed between two starts
            for namespace in list(self._held):
                self._queued(namespace)

    async def _cards_now(self, policy: Policy) -> Cards:
        """The device sizes: read again when the policy's facts change (the cluster check has
        read the driver's card sizes) and at least every CARDS_AGE seconds (a new node may
        publish more devices: what `allocationMode: All` can take)."""
        when = time.monotonic()
        if (
            self._cards is None
            or self._cards_of[0] is not policy
            or (when - self._cards_of[1] > CARDS_AGE)
        ):
            self._cards = await read_cards(self.api, policy, self.timeout)
            self._cards_of = (policy, when)
        return self._cards

    def _queued(self, namespace: str) -> None:
        if self._queue is not None:
            self._queue.add(namespace)

    def _missed(self, items: list[JsonObject] | None) -> None:
        """A watch started afresh: its events meanwhile are unknown, so every namespace that
        may need it is counted."""
        for namespace in set(self.view.limits) | set(self._held):
            self._queued(namespace)

    def _pod_event(self, kind: str, pod: JsonObject) -> None:
        namespace, name = _named(pod)
        held = self._held.get(namespace)
        labels = (pod.get("metadata") or {}).get("labels")
        if kind != "DELETED" and isinstance(labels, dict):
            if labels.get(HELD_LABEL) == HELD_LABEL_VALUE:
                held = self._held.setdefault(namespace, set())
                held.add(name)  # maybe held: the count says
        elif held is not None:
            held.discard(name)
        if held is not None:
            self._queued(namespace)

    def _claim_event(self, kind: str, claim: JsonObject) -> None:
        namespace, _ = _named(claim)
        if namespace in self._held:
            self._queued(namespace)

    def _cost(self, namespace: str) -> float:
        return self._queue.cost.get(namespace, 0.0) if self._queue is not None else 0.0

    def _report(self, released: int) -> PassReport:
        """What the metrics show: the pods `released` since the last report, and what each
        quota namespace's last count found."""
        report = PassReport(released=released, limits=dict(self.view.limits))
        for namespace in sorted(self._counted):
            done = self._counted[namespace]
            report.namespaces += 1
            report.held += done.held
            report.usage[namespace] = dict(done.usage.amounts)
        return report


def _named(item: JsonObject) -> tuple[str, str]:
    metadata = item.get("metadata") if isinstance(item, dict) else None
    metadata = metadata if isinstance(metadata, dict) else {}
    return str(metadata.get("namespace", "")), str(metadata.get("name", ""))
