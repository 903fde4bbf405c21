"""GPU quotas kept for converted pods (issue 47): the state is the cluster's own pods and claims.

Every GPU pod created in a namespace with a GPU quota is held by the scheduling gate
`hami.io/gpu-quota` (added at admission; the chart's ValidatingAdmissionPolicy refuses such a
pod without it, and lets only this webhook remove it). One replica at a time (a Lease) runs a
pass every `interval`: it lists every ResourceQuota, labels the namespaces whose quotas name a
kept key (the label sends their pods to the gate at admission), and for each such namespace
lists the live pods and claims and releases held pods oldest first while every limit holds
(core/quota/quota_plan.py). A pod that does not fit stays held, named in a Warning Event with
kube-apiserver's words. Nothing is reserved and nothing is remembered between passes but which
Events were sent, so a crash, a lost update or a new leader loses nothing: the next pass counts
the pods again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from hami_dra_webhook.cluster.events import About, event_body, post_event
from hami_dra_webhook.cluster.lease import Lease
from hami_dra_webhook.cluster.quota_usage import count_namespace, read_cards, read_claims
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.quota.gpu_quota import (
    GATE,
    HELD_LABEL,
    HELD_LABEL_VALUE,
    NAMESPACE_LABEL,
    NAMESPACE_LABEL_VALUE,
    Limit,
    limits_of,
    quota_keys,
)
from hami_dra_webhook.core.quota.quota_groups import Cards
from hami_dra_webhook.core.quota.quota_plan import Count, Held, QuotaPass, release
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.kube.port import ApiError, KubeApi, paths

log = logging.getLogger("hami_dra_webhook.quota")
EVENT_REASON = "GPUQuotaExceeded"
MAX_REMEMBERED_EVENTS = 100_000  # pods whose last Event is remembered (not sent again)
PARALLEL = 4  # namespaces counted at once


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
    interval: float = 1.0
    # Every quota namespace is read whole at least this often (held pods are otherwise found by
    # their label, which a tenant could remove).
    resync: float = 30.0
    timeout: float = 10.0
    observe: Callable[[PassReport], None] = lambda report: None
    _told: dict[str, str] = field(default_factory=dict)  # pod uid -> the reason last sent
    _last_resync: float = float("-inf")  # monotonic
    _cards: Cards | None = None  # the device sizes, read at each resync
    # Seconds each namespace's last count took: the cheapest go first, so that a namespace of
    # many pods (one tenant's) is counted while the others are released.
    _cost: dict[str, float] = field(default_factory=dict)

    async def run(self) -> None:
        """Pass after pass while this replica holds the lease; a failed call raises (the
        Supervisor restarts the job and counts it)."""
        while True:
            started = time.monotonic()
            if await self.lease.hold():
                self.observe(await self.run_pass())
            else:
                self.observe(PassReport())  # another replica reports; nothing stale here
            # A long pass (a namespace of thousands of pods) is followed by twice its time.
            await asyncio.sleep(max(self.interval, 2 * (time.monotonic() - started)))

    async def run_pass(self) -> PassReport:
        policy = self.policy()
        keys = quota_keys(policy)
        quotas = await self.api.list_path(paths.RESOURCE_QUOTAS, [], timeout=self.timeout)
        by_namespace: dict[str, list[JsonObject]] = defaultdict(list)
        for quota in quotas:
            namespace = str((quota.get("metadata") or {}).get("namespace", ""))
            by_namespace[namespace].append(quota)
        limits = {
            namespace: found
            for namespace, items in by_namespace.items()
            if (found := limits_of(items, keys))
        }
        labelled = await self._labelled()
        for namespace in sorted(set(limits) - labelled):
            await self._label(namespace, NAMESPACE_LABEL_VALUE)
        report = PassReport(limits=limits)
        ours = set(limits) | labelled
        if time.monotonic() - self._last_resync >= self.resync or self._cards is None:
            self._last_resync, due = time.monotonic(), ours
            # Hygon's and AMD's card sizes from their ResourceSlices, read as often
            self._cards = await read_cards(self.api, policy, self.timeout)
        else:
            due = (await self._with_held_pods() & ours) | (labelled - set(limits))
        cards = self._cards
        self._cost = {n: c for n, c in self._cost.items() if n in ours}
        order = sorted(due, key=lambda n: (self._cost.get(n, 0.0), n))
        passes = await self._namespaces(order, limits, policy, cards)
        for namespace, done in passes.items():
            report.namespaces += 1
            report.released += len(done.release)
            report.held += done.held
            report.usage[namespace] = dict(done.usage.amounts)
        for namespace in sorted(labelled - set(limits)):
            await self._label(namespace, None)  # its held pods were released just now
        live = {held.uid for held in report.held}
        self._told = {uid: why for uid, why in self._told.items() if uid in live}
        return report

    async def _namespaces(
        self, due: list[str], limits: dict[str, list[Limit]], policy: Policy, cards: Cards
    ) -> dict[str, QuotaPass]:
        """Each due namespace's pass, `PARALLEL` at a time and the cheapest first (as last
        counted), so that a large namespace (its tenant's many pods) delays no other's
        release; a namespace whose calls fail is retried next pass, the others go on (the first
        failure is raised once all have run, for the Supervisor to count)."""
        results: dict[str, QuotaPass] = {}
        failures: list[BaseException] = []
        turns = asyncio.Semaphore(PARALLEL)

        async def one(namespace: str) -> None:
            async with turns:
                started = time.monotonic()
                try:
                    results[namespace] = await self._namespace(
                        namespace, limits.get(namespace, []), policy, cards
                    )
                    self._cost[namespace] = time.monotonic() - started
                except ApiError as error:
                    log.warning("namespace %s: the quota pass failed: %s", namespace, error)
                    failures.append(error)

        await asyncio.gather(*(one(namespace) for namespace in due))
        if failures:
            raise failures[0]
        return {namespace: results[namespace] for namespace in due}

    async def _with_held_pods(self) -> set[str]:
        """The namespaces with a pod that is held: labelled held (one list, served from
        kube-apiserver's cache) and carrying the gate. The label is only where to look: a pod
        a tenant labelled without the gate (the label is theirs to write) sends the pass
        nowhere and is never written to."""
        selector = [("labelSelector", f"{HELD_LABEL}={HELD_LABEL_VALUE}")]
        found: set[str] = set()
        async for page in self.api.path_pages(paths.ALL_PODS, selector, timeout=self.timeout):
            found |= {
                str((p.get("metadata") or {}).get("namespace", ""))
                for p in page
                if isinstance(p, dict) and _gated(p)
            }
        return found

    async def _labelled(self) -> set[str]:
        selector = [("labelSelector", NAMESPACE_LABEL)]
        found = await self.api.list_path(paths.NAMESPACES, selector, timeout=self.timeout)
        return {str((n.get("metadata") or {}).get("name", "")) for n in found}

    async def _label(self, namespace: str, value: str | None) -> None:
        patch = {"metadata": {"labels": {NAMESPACE_LABEL: value}}}
        try:
            await self.api.patch_namespace(namespace, patch, timeout=self.timeout)
        except ApiError as error:
            if error.status != 404:
                raise
        log.info("namespace %s: GPU quota %s", namespace, "held" if value else "no longer held")

    async def _namespace(
        self, namespace: str, limits: list[Limit], policy: Policy, cards: Cards
    ) -> QuotaPass:
        keys = quota_keys(policy)
        claims = await read_claims(self.api, namespace, policy, keys, cards, self.timeout)
        count = Count(claims, policy, keys, cards)
        complete = await count_namespace(self.api, namespace, count, self.timeout)
        if not count.held:
            return QuotaPass(usage=count.usage)
        if not complete:
            # A pod too large to read holds what cannot be counted: nothing is released.
            log.warning("namespace %s: a pod too large to read; held pods stay held", namespace)
            return QuotaPass(usage=count.usage)
        result = release(count, limits)
        for held in result.release:
            if not self.lease.held:
                return result  # another replica may hold it by now: its next pass decides
            await self._release(namespace, held)
        for held in result.held:
            await self._tell(namespace, held)
        return result

    async def _release(self, namespace: str, held: Held) -> None:
        at = f"/spec/schedulingGates/{held.gate_index}"
        # By uid: a pod deleted and created again under its name (asking more) since it was
        # counted is not the pod counted, and is left to the next pass.
        operations = [
            {"op": "test", "path": "/metadata/uid", "value": held.uid},
            {"op": "test", "path": f"{at}/name", "value": GATE},
            {"op": "remove", "path": at},
        ]
        if held.labelled:
            label = "/metadata/labels/" + HELD_LABEL.replace("/", "~1")
            operations.append({"op": "remove", "path": label})
        try:
            await self.api.patch_pod(namespace, held.name, operations, timeout=self.timeout)
        except ApiError as error:
            if error.status not in (404, 422):  # gone, or its gates changed: the next pass
                raise
        log.info("released pod %s/%s: it fits its namespace's GPU quota", namespace, held.name)

    async def _tell(self, namespace: str, held: Held) -> None:
        """A Warning Event on a held pod, once per reason."""
        if self._told.get(held.uid) == held.reason or len(self._told) >= MAX_REMEMBERED_EVENTS:
            return
        self._told[held.uid] = held.reason
        message = f"held by scheduling gate {GATE}: {held.reason}"
        if held.quota:
            message += (
                "; it starts when the namespace's GPU pods free room, or when the quota is raised"
            )
        about = About("Pod", held.name, held.uid, namespace)
        await post_event(
            self.api, event_body(about, EVENT_REASON, message, "Warning"), self.timeout
        )


def _gated(pod: JsonObject) -> bool:
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return any(isinstance(g, dict) and g.get("name") == GATE for g in gates)
