"""GPU quotas kept for converted pods (issue 47): the state is the cluster's own pods and claims.

Every GPU pod created in a namespace with a GPU quota is held by the scheduling gate
`hami.io/gpu-quota` (added at admission; the chart's ValidatingAdmissionPolicy refuses such a
pod without it, and lets only this webhook remove it). One replica at a time (a Lease) runs a
pass every `interval`: it lists every ResourceQuota, labels the namespaces whose quotas name a
kept key (the label sends their pods to the gate at admission), and for each such namespace
lists the live pods and claims and releases held pods oldest first while every limit holds
(core/quota_plan.py). A pod that does not fit stays held, named in a Warning Event with
kube-apiserver's words. Nothing is reserved and nothing is remembered between passes but which
Events were sent, so a crash, a lost update or a new leader loses nothing: the next pass counts
the pods again.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from hami_dra_webhook.cluster.lease import Lease
from hami_dra_webhook.cluster.quota_usage import read_namespace
from hami_dra_webhook.core.gpu_quota import (
    GATE,
    NAMESPACE_LABEL,
    NAMESPACE_LABEL_VALUE,
    Cards,
    Limit,
    limits_of,
    quota_keys,
)
from hami_dra_webhook.core.policy import Policy
from hami_dra_webhook.core.quota_plan import Held, QuotaPass, plan_pass
from hami_dra_webhook.core.types import JsonObject
from hami_dra_webhook.kube.port import ApiError, KubeApi, paths

log = logging.getLogger("hami_dra_webhook.quota")
EVENT_REASON = "GPUQuotaExceeded"
MAX_REMEMBERED_EVENTS = 100_000  # pods whose last Event is remembered (not sent again)


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
    timeout: float = 10.0
    observe: Callable[[PassReport], None] = lambda report: None
    _told: dict[str, str] = field(default_factory=dict)  # pod uid -> the reason last sent

    async def run(self) -> None:
        """Pass after pass while this replica holds the lease; a failed call raises (the
        Supervisor restarts the job and counts it)."""
        while True:
            if await self.lease.hold():
                self.observe(await self.run_pass())
            else:
                self.observe(PassReport())  # another replica reports; nothing stale here
            await asyncio.sleep(self.interval)

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
            if (found := limits_of(items, keys, policy.nvidia.memory_factor))
        }
        labelled = await self._labelled()
        for namespace in sorted(set(limits) - labelled):
            await self._label(namespace, NAMESPACE_LABEL_VALUE)
        report = PassReport(limits=limits)
        cards = Cards(policy.largest_memory_mib)
        for namespace in sorted(set(limits) | labelled):
            done = await self._namespace(namespace, limits.get(namespace, []), policy, cards)
            report.namespaces += 1
            report.released += len(done.release)
            report.held += done.held
            report.usage[namespace] = dict(done.usage.amounts)
        for namespace in sorted(labelled - set(limits)):
            await self._label(namespace, None)  # its held pods were released just now
        live = {held.uid for held in report.held}
        self._told = {uid: why for uid, why in self._told.items() if uid in live}
        return report

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
        pods, complete = await read_namespace(self.api, namespace, self.timeout)
        if not any(_gated(p) for p in pods):
            return QuotaPass()  # nothing to release: the claims are not even read
        if not complete:
            # A pod too large to read holds what cannot be counted: nothing is released.
            log.warning("namespace %s: a pod too large to read; held pods stay held", namespace)
            return QuotaPass()
        claims = await self.api.list_path(paths.claims(namespace), [], timeout=self.timeout)
        result = plan_pass(pods, claims, limits, policy, quota_keys(policy), cards)
        for held in result.release:
            if not self.lease.held:
                return result  # another replica may hold it by now: its next pass decides
            await self._release(namespace, held)
        for held in result.held:
            await self._tell(namespace, held)
        return result

    async def _release(self, namespace: str, held: Held) -> None:
        at = f"/spec/schedulingGates/{held.gate_index}"
        operations = [
            {"op": "test", "path": f"{at}/name", "value": GATE},
            {"op": "remove", "path": at},
        ]
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
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        message = f"held by scheduling gate {GATE}: {held.reason}"
        if held.quota:
            message += (
                "; it starts when the namespace's GPU pods free room, or when the quota is raised"
            )
        event: JsonObject = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{held.name[:200]}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": namespace,
                "name": held.name,
                "uid": held.uid,
            },
            "reason": EVENT_REASON,
            "message": message[:1024],
            "type": "Warning",
            "source": {"component": "hami-dra-webhook"},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self.api.create_object(paths.events(namespace), event, timeout=self.timeout)
        except ApiError as error:  # an Event is a courtesy: the pod stays held all the same
            log.warning("no Event for held pod %s/%s: %s", namespace, held.name, error)


def _gated(pod: JsonObject) -> bool:
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return any(isinstance(g, dict) and g.get("name") == GATE for g in gates)
