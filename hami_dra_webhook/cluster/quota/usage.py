"""What each GPU quota of the cluster holds now, read from the live pods and claims as the
quota pass reads them (`check`, `migrate status` and `scan --cluster` show it)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.quota.gpu_quota import (
    HELD_LABEL,
    Charge,
    KeyRule,
    limits_of,
    quota_keys,
)
from hami_dra_webhook.core.quota.quota_groups import (
    Cards,
    cards_for,
    groups,
    largest_memory_mib,
    most_devices_per_node,
)
from hami_dra_webhook.core.quota.quota_plan import Count, claim_charges
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.kube.port import KubeApi, paths

LIVE = "status.phase!=Succeeded,status.phase!=Failed"


@dataclass(frozen=True, slots=True)
class QuotaLine:
    namespace: str
    quota: str
    key: str
    used: int | None  # None: a pod holds what cannot be counted
    hard: int
    held: int  # pods of the namespace held by the gate now

    def as_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "quota": self.quota,
            "key": self.key,
            "used": self.used,
            "hard": self.hard,
            "heldPods": self.held,
        }

    @property
    def used_words(self) -> str:
        return "unknown" if self.used is None else str(self.used)


async def count_namespace(
    api: KubeApi,
    namespace: str,
    count: Count,
    timeout: float,
) -> bool:
    """Count the namespace's live pods a page at a time (held ones kept slim); whether every
    pod could be read."""
    skipped = api.skipped_items
    async for page in api.pod_pages(namespace, timeout=timeout, field_selector=LIVE):
        for pod in page:
            if not isinstance(pod, dict):
                continue
            count.add(slim_pod(pod))
    return api.skipped_items == skipped


async def read_claims(
    api: KubeApi,
    namespace: str,
    policy: Policy,
    keys: Mapping[str, KeyRule],
    cards: Cards,
    timeout: float,
) -> dict[str, Charge]:
    """The charge of each of the namespace's ResourceClaims, by name, read a page at a time
    (no claim is kept)."""
    charges: dict[str, Charge] = {}
    async for page in api.path_pages(paths.claims(namespace), [], timeout=timeout):
        claim_charges(page, policy, keys, cards, into=charges)
    return charges


async def read_gpu_quotas(
    api: KubeApi, policy: Policy, timeout: float, namespace: str | None = None
) -> list[QuotaLine]:
    """Each kept key of each ResourceQuota (of `namespace`, or all): used, hard, held pods."""
    keys = quota_keys(policy)
    quotas = await api.list_path(paths.RESOURCE_QUOTAS, [], timeout=timeout)
    by_namespace: dict[str, list[JsonObject]] = defaultdict(list)
    for quota in quotas:
        where = str((quota.get("metadata") or {}).get("namespace", ""))
        if namespace is None or where == namespace:
            by_namespace[where].append(quota)
    lines = []
    cards = await read_cards(api, policy, timeout)
    for where, items in sorted(by_namespace.items()):
        limits = limits_of(items, keys)
        if not limits:
            continue
        charges = await read_claims(api, where, policy, keys, cards, timeout)
        count = Count(charges, policy, keys, cards)
        complete = await count_namespace(api, where, count, timeout)
        for limit in limits:
            known = complete and limit.key not in count.usage.unknown
            used = count.usage.of(limit.key) if known else None
            held = len(count.held)
            lines.append(QuotaLine(where, limit.quota, limit.key, used, limit.hard, held))
    return lines


async def read_cards(api: KubeApi, policy: Policy, timeout: float) -> Cards:
    """The device sizes a charge needs: the policy's, the largest card that Hygon's and AMD's
    drivers publish, and the most devices of each group on one node (what `allocationMode:
    All` can take), read from the converted families' drivers' ResourceSlices."""
    memory, per_node = {}, {}
    listed: dict[str, list[JsonObject]] = {}
    for group in groups(policy):
        if group.driver not in listed:
            listed[group.driver] = await api.list_resource_slices(group.driver, timeout=timeout)
        slices = listed[group.driver]
        per_node[group.key] = most_devices_per_node(slices, group.driver)
        if group.sized_by_slices:
            memory[group.key] = largest_memory_mib(slices, group.driver)
    return cards_for(policy, memory, per_node)


def slim_pod(pod: JsonObject) -> JsonObject:
    """What a pass reads of a pod (its GPU resources, claims and gates), so that a namespace of
    10,000 pods is held in a few MiB."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}

    def slim(containers: Any) -> list[JsonObject]:
        return [
            {
                "name": c.get("name"),
                "resources": c.get("resources") or {},
                **({"restartPolicy": c["restartPolicy"]} if "restartPolicy" in c else {}),
            }
            for c in containers or []
            if isinstance(c, dict)
        ]

    kept_spec: JsonObject = {"containers": slim(spec.get("containers"))}
    for key in ("resourceClaims", "schedulingGates"):
        if spec.get(key):
            kept_spec[key] = spec[key]
    if spec.get("initContainers"):
        kept_spec["initContainers"] = slim(spec["initContainers"])
    kept_metadata = {
        k: metadata.get(k)
        for k in ("name", "uid", "namespace", "creationTimestamp", "resourceVersion")
    }
    held = (metadata.get("labels") or {}).get(HELD_LABEL)
    if held is not None:
        kept_metadata["labels"] = {HELD_LABEL: held}
    return {
        "metadata": kept_metadata,
        "spec": kept_spec,
        "status": {
            k: status[k]
            for k in ("phase", "resourceClaimStatuses", "extendedResourceClaimStatus")
            if k in status
        },
    }
