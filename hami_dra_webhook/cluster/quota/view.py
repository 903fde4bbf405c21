"""Every replica's view of the cluster's GPU quotas (issue 62): the ResourceQuotas, listed once
and then watched (cluster/watched.py), reduced to the limits on the keys this webhook keeps,
by namespace. Admission asks it whether a GPU pod created in a namespace is held
(`holds`); the replica that runs the quota work is told of each namespace whose limits change.

The chart's `<release>-gpu-quota` policy reads the ResourceQuotas itself (kube-apiserver's own
watched copy) and refuses a GPU pod created without the gate where one names a kept key. The
view answers from the moment it has listed them, whichever replica answers and whether or not
the quota work has run; until then (a replica just started, a watch that broke and listed
again), a namespace's quotas are read from kube-apiserver's cache at each admission, and a pod
is held when that read fails: never refused for the webhook's lag, never let through. (A
consistent read at every admission would also close the milliseconds in which a brand-new
quota is in kube-apiserver's copy and not yet in the view; measured, it cost 87 ms a pod in
every namespace without a quota: docs/design/2026-12-07-quota-by-watches.md.)"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from hami_dra_webhook.cluster.watched import Watched
from hami_dra_webhook.core.model.resource_quota_view import ResourceQuotaView
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.quota.gpu_quota import KeyRule, Limit, limits_of
from hami_dra_webhook.kube.port import ApiError, KubeApi, paths

log = logging.getLogger("hami_dra_webhook.quota")
Key = tuple[str, str]  # (namespace, name)


@dataclass
class QuotaView:
    api: KubeApi
    keys: dict[str, KeyRule]  # gpu_quota.quota_keys(policy)
    timeout: float = 5.0  # a read of one namespace's quotas, at admission
    limits: dict[str, list[Limit]] = field(default_factory=dict)  # namespace -> its limits
    # namespace -> quota name -> its limits on the kept keys
    _quotas: dict[str, dict[str, list[Limit]]] = field(default_factory=dict, repr=False)
    _told: list[Callable[[str], None]] = field(default_factory=list, repr=False)
    watched: Watched = field(init=False)

    def __post_init__(self) -> None:
        self.watched = Watched(
            self.api,
            paths.RESOURCE_QUOTAS,
            [],
            "ResourceQuotas",
            on_list=self._listed,
            on_event=self._event,
        )

    @property
    def synced(self) -> bool:
        return self.watched.synced

    async def run(self) -> None:
        await self.watched.run()

    async def refresh(self) -> None:
        """List the quotas now (a test's or a tool's one pass; the job keeps them watched)."""
        items, _ = await self.api.list_versioned(paths.RESOURCE_QUOTAS, [], timeout=30.0)
        self._listed(items)

    def tell(self, changed: Callable[[str], None]) -> None:
        """Call `changed(namespace)` whenever a namespace's limits change."""
        self._told.append(changed)

    async def holds(self, namespace: str) -> bool:
        """Whether a GPU pod created in `namespace` now is created held (module docstring)."""
        if namespace in self.limits:
            return True
        if self.synced:
            return False
        try:
            quotas = await self.api.list_path(
                paths.resource_quotas(namespace), [("resourceVersion", "0")], timeout=self.timeout
            )
        except ApiError as error:
            log.warning("the ResourceQuotas of %s could not be read (%s): held", namespace, error)
            return True
        return bool(limits_of(quotas, self.keys))

    def _listed(self, items: list[JsonObject] | None) -> None:
        if items is None:
            return
        before = set(self._quotas)
        self._quotas = {}
        for quota in items:
            (namespace, name), found = self._read(quota)
            if found:
                self._quotas.setdefault(namespace, {})[name] = found
        self._regroup(before | set(self._quotas))

    def _event(self, kind: str, quota: JsonObject) -> None:
        (namespace, name), found = self._read(quota)
        named = self._quotas.setdefault(namespace, {})
        if kind != "DELETED" and found:
            named[name] = found
        else:
            named.pop(name, None)
        if not named:
            del self._quotas[namespace]
        self._regroup({namespace})

    def _read(self, quota: JsonObject) -> tuple[Key, list[Limit]]:
        view = ResourceQuotaView.of(quota)
        return (view.namespace, view.name), limits_of([quota], self.keys)

    def _regroup(self, namespaces: set[str]) -> None:
        for namespace in sorted(namespaces):
            named = self._quotas.get(namespace, {})
            found = [limit for name in sorted(named) for limit in named[name]]
            before = self.limits.get(namespace)
            if found:
                self.limits[namespace] = found
            else:
                self.limits.pop(namespace, None)
            if found != (before or []):
                for changed in self._told:
                    changed(namespace)
