"""Read a cluster in migration once, for `check`, `migrate status` and `migrate node`: nodes,
the driver's ResourceSlices, allocated claims, GPU pods (a page at a time; only GPU pods are
kept, each judged by what it holds: core/migration/holdings.py), namespace labels,
PodDisruptionBudgets and the webhook's scope."""

from __future__ import annotations

import asyncio
from typing import cast

from hami_dra_webhook.core.migration.holdings import ClaimIndex
from hami_dra_webhook.core.migration.pool_plan import GpuPod, Inventory, gpu_pod
from hami_dra_webhook.core.migration.pools import (
    Device,
    NodeGpus,
    Scope,
    allocated,
    node_gpus,
    slice_devices,
)
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.kube.port import ApiError, KubeApi, paths


async def read_scope(api: KubeApi, webhook_configuration: str, timeout: float) -> Scope:
    """The scope the installed webhook applies (its pod webhook's selectors); `all` when the
    configuration is not installed."""
    try:
        config = await api.get_webhook_configuration(webhook_configuration, timeout=timeout)
    except ApiError as error:
        if error.status == 404:
            return Scope("all")
        raise
    webhooks = config.get("webhooks") or []
    return Scope.of_webhook(webhooks[0]) if webhooks else Scope("all")


async def read_inventory(
    api: KubeApi,
    policy: Policy,
    scope: Scope,
    timeout: float = 20.0,
    read: tuple[list[JsonObject], list[JsonObject]] | None = None,
) -> Inventory:
    """`read`: the driver's ResourceSlices and the Nodes, when the caller has listed them
    already (`check`: one copy of each, not two)."""
    driver = policy.webhook.driver_name
    # Asked for together: kube-apiserver answers one while this process decodes another.
    answers = await asyncio.gather(
        _given(read[0]) if read else api.list_resource_slices(driver, timeout=timeout),
        _given(read[1]) if read else api.list_path(paths.NODES, [], timeout=timeout),
        _claim_index(api, driver, timeout),
        api.list_path(paths.NAMESPACES, [], timeout=timeout),
        api.list_path(paths.ALL_DISRUPTION_BUDGETS, [], timeout=timeout),
        return_exceptions=True,
    )
    for answer in answers:
        if isinstance(answer, BaseException):
            raise answer
    slices, node_list, _, namespace_list, budgets = cast(
        "tuple[list[JsonObject], ...]", tuple(answers)
    )
    claims = cast(ClaimIndex, answers[2])
    devices: dict[str, list[Device]] = {}
    for resource_slice in slices:
        for device in slice_devices(resource_slice):
            devices.setdefault(device.node, []).append(device)
    count_name = policy.legacy_resource_names.gpus
    nodes: dict[str, NodeGpus] = {}
    for node in node_list:
        gpus = node_gpus(node, count_name, devices.get(str(node["metadata"]["name"]), []))
        nodes[gpus.name] = gpus
    pods: list[GpuPod] = []
    async for page in api.workload_pages("Pod", None, timeout=timeout):
        for pod in page:
            if (pod.get("metadata") or {}).get("deletionTimestamp"):
                continue  # ending: neither where it runs nor where it would go counts
            found = gpu_pod(pod, policy, claims)
            if found is not None:
                pods.append(found)
    for found in pods:
        bound = nodes.get(found.node)
        if bound is not None:
            bound.pods += 1
            if found.holds_legacy:
                bound.legacy_used += found.legacy_count
    namespaces = {
        str(n["metadata"]["name"]): dict(n["metadata"].get("labels") or {}) for n in namespace_list
    }
    return Inventory(
        nodes=nodes,
        used=allocated(claims.by_name.values(), driver),
        pods=pods,
        namespace_labels=namespaces,
        budgets=budgets,
        scope=scope,
    )


async def _given(items: list[JsonObject]) -> list[JsonObject]:
    return items


async def _claim_index(api: KubeApi, driver: str, timeout: float) -> ClaimIndex:
    """The driver's allocated claims, a page at a time (the whole list is never held)."""
    index = ClaimIndex(driver)
    async for page in api.path_pages(paths.ALL_CLAIMS, [], timeout=timeout):
        index.add(page)
    return index
