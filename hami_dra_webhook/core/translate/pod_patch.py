"""The JSON patch operations of a converted pod: legacy keys stripped, claims added to the
containers and the pod, each family's environment, the pod's label, annotation, scheduler and
runtime class."""

from __future__ import annotations

import itertools
from typing import Any

from hami_dra_webhook.core.legacy.request import has_legacy_keys, resource_maps
from hami_dra_webhook.core.model import patch
from hami_dra_webhook.core.model.types import ContainerRef, JsonObject, NotConvertible
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.translate.claims import DRA_LABEL
from hami_dra_webhook.core.translate.gpu_container import GpuContainer
from hami_dra_webhook.core.vendors.nvidia import VISIBLE_DEVICES_ENV


def hide_ops(
    every: list[tuple[ContainerRef, Any]], names: tuple[str, ...], warnings: list[str]
) -> list[patch.PatchOp]:
    """overwriteEnv: as legacy HAMi, every container without a GPU request gets
    NVIDIA_VISIBLE_DEVICES=none, so that an nvidia default runtime shows it no GPU."""
    ops: list[patch.PatchOp] = []
    for ref, container in every:
        if not has_legacy_keys(container, names) and _hideable(container):
            ops += env_ops(ref, container, {VISIBLE_DEVICES_ENV: "none"}, warnings)
    return ops


def _hideable(container: Any) -> bool:
    """A container overwriteEnv gives NVIDIA_VISIBLE_DEVICES=none: a map (anything else is for
    kube-apiserver's validation to refuse) that uses no DRA claim (a claim may hold a GPU: ours,
    once converted)."""
    if not isinstance(container, dict):
        return False
    resources = container.get("resources")
    return not (isinstance(resources, dict) and resources.get("claims"))


def strip_ops(gpus: list[GpuContainer]) -> list[patch.PatchOp]:
    """Remove every legacy key from limits and requests (of each family a container names: its
    families are next to each other in `gpus`); a map left empty goes too."""
    ops: list[patch.PatchOp] = []
    for ref, same in itertools.groupby(gpus, key=_ref):
        families = list(same)
        base = ("spec", ref.list_name, ref.position, "resources")
        limits, requests = resource_maps(families[0].container)
        for map_name, values, keys in (
            ("limits", limits, [k for gpu in families for k in gpu.request.in_limits]),
            ("requests", requests, [k for gpu in families for k in gpu.request.in_requests]),
        ):
            if not keys:
                continue
            if len(values) == len(keys):
                ops.append(patch.remove(patch.pointer(*base, map_name)))
            else:
                ops += [patch.remove(patch.pointer(*base, map_name, key)) for key in keys]
    return ops


def _ref(gpu: GpuContainer) -> ContainerRef:
    return gpu.ref


def container_claim_op(gpu: GpuContainer, claim: str, appended: bool) -> patch.PatchOp:
    """Add the claim to the container's resources.claims (`appended`: this patch gave the
    container its list already, for another family's claim)."""
    resources = gpu.container["resources"]
    path = ("spec", gpu.ref.list_name, gpu.ref.position, "resources", "claims")
    existing = resources.get("claims")
    if appended:
        return patch.add(patch.pointer(*path, "-"), {"name": claim})
    if existing is None:
        return patch.add(patch.pointer(*path), [{"name": claim}])
    if not isinstance(existing, list):
        raise NotConvertible(
            f"{gpu.ref.label}: resources.claims is not a list", code=400, reason="malformed-pod"
        )
    return patch.add(patch.pointer(*path, "-"), {"name": claim})


def env_ops(
    ref: ContainerRef, container: Any, wanted: dict[str, str], warnings: list[str]
) -> list[patch.PatchOp]:
    if not wanted:
        return []
    env = container.get("env")
    if env is not None and not isinstance(env, list):
        raise NotConvertible(f"{ref.label}: env is not a list", code=400, reason="malformed-pod")
    present: dict[str, Any] = {}
    for index, entry in enumerate(env or []):
        if not isinstance(entry, dict):
            raise NotConvertible(
                f"{ref.label}: env[{index}] is not a map", code=400, reason="malformed-pod"
            )
        name = entry.get("name")
        if not isinstance(name, str):
            raise NotConvertible(
                f"{ref.label}: env[{index}].name is not a string", code=400, reason="malformed-pod"
            )
        present[name] = entry.get("value")
    entries = []
    for name, value in wanted.items():
        if name not in present:
            entries.append({"name": name, "value": value})
        elif present[name] != value:
            warnings.append(f"{ref.label}: keeps its own {name} (not set to {value})")
    path = ("spec", ref.list_name, ref.position, "env")
    if not entries:
        return []
    if env is None:
        return [patch.add(patch.pointer(*path), entries)]
    return [patch.add(patch.pointer(*path, "-"), entry) for entry in entries]


def annotation_ops(metadata: JsonObject | None, key: str, value: str) -> list[patch.PatchOp]:
    """Set one annotation (after pod_ops, which gives the pod its metadata if it had none)."""
    annotations = None if metadata is None else metadata.get("annotations")
    if annotations is None:
        return [patch.add("/metadata/annotations", {key: value})]
    if not isinstance(annotations, dict):
        raise NotConvertible("metadata.annotations is not a map", code=400, reason="malformed-pod")
    return [patch.add(patch.pointer("metadata", "annotations", key), value)]


def pod_ops(
    metadata: JsonObject | None,
    spec: JsonObject,
    claims: list[JsonObject],
    is_gpu_pod: bool,
    runtime_class: str,
    policy: Policy,
    warnings: list[str],
) -> list[patch.PatchOp]:
    ops = []
    if claims:
        if spec.get("resourceClaims") is None:
            ops.append(patch.add("/spec/resourceClaims", claims))
        else:
            ops += [patch.add("/spec/resourceClaims/-", claim) for claim in claims]
    labels = None if metadata is None else metadata.get("labels")
    if metadata is None:
        ops.append(patch.add("/metadata", {"labels": {DRA_LABEL: "true"}}))
    elif labels is None:
        ops.append(patch.add("/metadata/labels", {DRA_LABEL: "true"}))
    elif not isinstance(labels, dict):
        raise NotConvertible("metadata.labels is not a map", code=400, reason="malformed-pod")
    elif labels.get(DRA_LABEL) != "true":
        ops.append(patch.add(patch.pointer("metadata", "labels", DRA_LABEL), "true"))
    if is_gpu_pod and spec.get("schedulerName") == policy.webhook.legacy_scheduler_name:
        ops.append(patch.remove("/spec/schedulerName"))
        warnings.append(
            f"schedulerName {policy.webhook.legacy_scheduler_name} removed: DRA uses kube-scheduler"
        )
    if is_gpu_pod and runtime_class and not spec.get("runtimeClassName"):
        ops.append(patch.add("/spec/runtimeClassName", runtime_class))
    return ops
