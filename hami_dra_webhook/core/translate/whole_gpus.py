"""Whole GPUs left to kube-scheduler (hamiDraWebhook.wholeGpusByExtendedResource, Kubernetes
1.36+, KEP-5004 DRAExtendedResource): the chart gives the DeviceClass
`extendedResourceName: nvidia.com/gpu`, and kube-scheduler itself turns a pod's
`nvidia.com/gpu: N` into a claim for N whole devices of that class on nodes without a device
plugin for it. For a pod that asks for nothing else this is exactly what legacy HAMi meant
(count only: N exclusive cards, all their memory and all their cores; docs/translation.md) and what
this webhook would write, so the webhook leaves such pods alone (and the chart's
matchConditions never send them).

It is exact only when nothing but the count reaches the container: no other legacy resource
(gpumem, gpumem-percentage, gpucores, priority), no annotation the webhook reads (UUIDs,
types, vgpu-mode, scheduling policies), no init container with GPUs (legacy counts the peak of
init and app containers), kube-scheduler as the pod's scheduler, and no policy that adds to a
GPU container (overwriteEnv, runtimeClassName, gpuCorePolicy other than default,
libCudaLogLevel): the policy refuses the flag with those (core/settings/policy.py).
"""

from __future__ import annotations

from typing import Any

from hami_dra_webhook.core.legacy.request import resource_maps
from hami_dra_webhook.core.legacy.selectors import SELECTOR_ANNOTATIONS
from hami_dra_webhook.core.model.types import ContainerRef, JsonObject
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.vendors.families import converted_names

DEFAULT_SCHEDULERS = ("", "default-scheduler")


def left_to_scheduler(
    metadata: JsonObject, spec: JsonObject, every: list[tuple[ContainerRef, Any]], policy: Policy
) -> str | None:
    """Why the pod is left to kube-scheduler's extended-resource claims, or None when the
    webhook converts it."""
    if not policy.webhook.whole_gpus_by_extended_resource:
        return None
    count = policy.legacy_resource_names.gpus
    if str(spec.get("schedulerName") or "") not in DEFAULT_SCHEDULERS:
        return None
    annotations = metadata.get("annotations") or {}
    if not isinstance(annotations, dict) or any(k in annotations for k in SELECTOR_ANNOTATIONS):
        return None
    legacy = frozenset(converted_names(policy))  # as the chart's matchConditions list them
    gpus = 0
    for ref, container in every:
        limits, requests = resource_maps(container)
        used = (set(limits) | set(requests)) & legacy
        if not used:
            continue
        if used != {count} or ref.list_name != "containers":
            return None
        gpus += 1
    if not gpus:
        return None
    return (
        f"whole GPUs, left to kube-scheduler: DeviceClass {policy.webhook.device_class_name}"
        f" has extendedResourceName {count} (hamiDraWebhook.wholeGpusByExtendedResource)"
    )
