"""One namespace's turn of the GPU quota work: its live pods and claims read (a page at a time),
its held pods released oldest first while every limit holds (core/quota/quota_plan.py), each
by its uid, and a Warning Event, once per reason, on each pod that stays held. The namespace
label that shows which namespaces hold their GPU pods (`kubectl get ns -l
hami.io/gpu-quota`) is written here too. Nothing is reserved and nothing is remembered but
which Events were sent, so a crash, a lost update or a new holder of the Lease loses nothing:
the next turn counts the pods again."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from hami_dra_webhook.cluster.events import About, event_body, post_event
from hami_dra_webhook.cluster.quota.usage import count_namespace, read_claims
from hami_dra_webhook.core.model import patch
from hami_dra_webhook.core.quota.gpu_quota import (
    GATE,
    HELD_LABEL,
    NAMESPACE_LABEL,
    Limit,
    quota_keys,
)
from hami_dra_webhook.core.quota.quota_groups import Cards
from hami_dra_webhook.core.quota.quota_plan import Count, Held, QuotaPass, release
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.kube.port import ApiError, KubeApi

log = logging.getLogger("hami_dra_webhook.quota")
EVENT_REASON = "GPUQuotaExceeded"
MAX_REMEMBERED_EVENTS = 100_000  # pods whose last Event is remembered (not sent again)


@dataclass
class NamespaceTurn:
    api: KubeApi
    still_held: Callable[[], bool]  # the Lease: no release once it may be another's
    timeout: float = 10.0
    _told: dict[str, str] = field(default_factory=dict)  # pod uid -> the reason last sent
    _told_in: dict[str, set[str]] = field(default_factory=dict)  # namespace -> uids told

    async def count(
        self, namespace: str, limits: list[Limit], policy: Policy, cards: Cards
    ) -> QuotaPass:
        """The namespace counted; its held pods that fit released, the others told why."""
        keys = quota_keys(policy)
        claims = await read_claims(self.api, namespace, policy, keys, cards, self.timeout)
        count = Count(claims, policy, keys, cards)
        complete = await count_namespace(self.api, namespace, count, self.timeout)
        if not count.held:
            self._forget(namespace, set())
            return QuotaPass(usage=count.usage)
        if not complete:
            # A pod too large to read holds what cannot be counted: nothing is released.
            log.warning("namespace %s: a pod too large to read; held pods stay held", namespace)
            return QuotaPass(usage=count.usage)
        result = release(count, limits)
        for held in result.release:
            if not self.still_held():
                return result  # another replica may hold the Lease by now: it decides
            await self._release(namespace, held)
        for held in result.held:
            await self._tell(namespace, held)
        self._forget(namespace, {held.uid for held in result.held})
        return result

    async def label(self, namespace: str, value: str | None) -> None:
        """The namespace label on (`value`) or off (None)."""
        merge = {"metadata": {"labels": {NAMESPACE_LABEL: value}}}
        try:
            await self.api.patch_namespace(namespace, merge, timeout=self.timeout)
        except ApiError as error:
            if error.status != 404:
                raise
        log.info("namespace %s: GPU quota %s", namespace, "held" if value else "no longer held")

    async def _release(self, namespace: str, held: Held) -> None:
        at = patch.pointer("spec", "schedulingGates", str(held.gate_index))
        # By uid: a pod deleted and created again under its name (asking more) since it was
        # counted is not the pod counted, and is left to the next turn.
        operations = [
            {"op": "test", "path": "/metadata/uid", "value": held.uid},
            {"op": "test", "path": f"{at}/name", "value": GATE},
            {"op": "remove", "path": at},
        ]
        if held.labelled:
            operations.append(
                {"op": "remove", "path": patch.pointer("metadata", "labels", HELD_LABEL)}
            )
        try:
            await self.api.patch_pod(namespace, held.name, operations, timeout=self.timeout)
        except ApiError as error:
            if error.status not in (404, 422):  # gone, or its gates changed: the next turn
                raise
        log.info("released pod %s/%s: it fits its namespace's GPU quota", namespace, held.name)

    async def _tell(self, namespace: str, held: Held) -> None:
        """A Warning Event on a held pod, once per reason."""
        if self._told.get(held.uid) == held.reason or len(self._told) >= MAX_REMEMBERED_EVENTS:
            return
        self._told[held.uid] = held.reason
        self._told_in.setdefault(namespace, set()).add(held.uid)
        message = f"held by scheduling gate {GATE}: {held.reason}"
        if held.quota:
            message += (
                "; it starts when the namespace's GPU pods free room, or when the quota is raised"
            )
        about = About("Pod", held.name, held.uid, namespace)
        await post_event(
            self.api, event_body(about, EVENT_REASON, message, "Warning"), self.timeout
        )

    def _forget(self, namespace: str, live: set[str]) -> None:
        """Keep only what was told of the namespace's pods still held (by uid)."""
        told = self._told_in.pop(namespace, set())
        for uid in told - live:
            self._told.pop(uid, None)
        if told & live:
            self._told_in[namespace] = told & live
