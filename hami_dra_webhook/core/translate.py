"""`translate_pod`: one pod dict in, a `Decision` (converted, unchanged or refused) out."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

import orjson

from hami_dra_webhook.core import patch
from hami_dra_webhook.core.claims import (
    CONVERTED_FROM_ANNOTATION,
    DRA_LABEL,
    Taken,
    ask_template,
    claim_name,
    converted_from,
    legacy_record,
)
from hami_dra_webhook.core.containers import containers
from hami_dra_webhook.core.decision import (
    INIT_CLAIMS_HELD,
    ContainerPlan,
    Converted,
    Decision,
    Refusal,
    Unchanged,
)
from hami_dra_webhook.core.legacy import has_legacy_keys, resource_maps
from hami_dra_webhook.core.pod_view import OPT_OUT_LABEL
from hami_dra_webhook.core.policy import Policy
from hami_dra_webhook.core.selectors import device_filter
from hami_dra_webhook.core.types import ContainerRef, JsonObject, NotConvertible
from hami_dra_webhook.core.vendors import nvidia
from hami_dra_webhook.core.vendors.families import (
    BY_KEY,
    NVIDIA,
    container_families,
    families,
    names_a_family,
)
from hami_dra_webhook.core.vendors.nvidia import TASK_PRIORITY_ENV
from hami_dra_webhook.core.vendors.profile import Resolved
from hami_dra_webhook.core.whole_gpus import left_to_scheduler

# What one admission may write: a pod with more distinct GPU requests than this is not a
# legacy manifest, and each template is created before the answer.
MAX_TEMPLATES_PER_POD = 16
# More containers than a GPU pod stored by kube-apiserver can have (a defaulted container is
# over 150 bytes of JSON; etcd's default limit is 1.5 MiB an object): only a direct caller
# sends more, and each costs translation time.
MAX_CONTAINERS_PER_POD = 10_000
MAX_TEMPLATE_BYTES_PER_POD = 256 * 1024
DEFAULT_SCHEDULERS = (None, "", "default-scheduler")
CORE_POLICY_ENV = "GPU_CORE_UTILIZATION_POLICY"
LOG_LEVEL_ENV = "LIBCUDA_LOG_LEVEL"
VISIBLE_DEVICES_ENV = "NVIDIA_VISIBLE_DEVICES"


class _GpuContainer:
    """A container with legacy keys while it is translated: its plan, and the container itself
    (which the plan, kept in the decision and the cache, does not hold). The plan's fields are
    read through plain attributes (properties cost on this path)."""

    __slots__ = (
        "container",
        "is_gpu",
        "plan",
        "record",
        "ref",
        "request",
        "runtime_class",
        "share",
    )

    def __init__(self, resolved: Resolved, container: JsonObject) -> None:
        plan = self.plan = resolved.plan
        self.container = container
        self.ref, self.request, self.share = plan.ref, plan.request, plan.share
        # A GPU container in legacy's eyes: it names a count, or gets a device.
        self.is_gpu = plan.request.count is not None or plan.gets_devices
        # Its template's legacy record (NVIDIA's is written with its ask) and the runtime class
        # its devices need.
        self.record, self.runtime_class = resolved.record, resolved.runtime_class


def translate_pod(pod: Any, policy: Policy, namespace: str | None = None) -> Decision:
    """Decide for a raw pod dict (or a pod template: metadata + spec) what legacy HAMi meant.

    Warnings come whole; the admission encoder cuts them to what kube-apiserver shows."""
    translation = _Translation(policy, namespace)
    try:
        return translation.decide(pod)
    except NotConvertible as refusal:
        return Refusal(
            code=refusal.code,
            message=refusal.message,
            warnings=translation.warnings,
            reason=refusal.reason,
            plan=tuple(gpu.plan for gpu in translation.gpus),
        )


def too_many_containers(count: int, every: Iterable[Any], policy: Policy) -> Decision:
    """The decision for a pod of `count` containers, more than MAX_CONTAINERS_PER_POD, from
    `every` container (read only as far as its resources, and only up to the first with a
    legacy key: a direct caller's 40,000 containers cost no more than that)."""
    if policy.nvidia.overwrite_env or any(names_a_family(c, policy) for c in every):
        return Refusal(
            code=422,
            message=f"the pod has {count} containers; at most {MAX_CONTAINERS_PER_POD} are"
            " converted in one pod",
            warnings=[],
        )
    return Unchanged(warnings=[])


class _Translation:
    """One pod's translation: what it has said (warnings) and understood (the GPU containers
    resolved so far, which a refusal reports) while it decides."""

    def __init__(self, policy: Policy, namespace: str | None) -> None:
        self.policy, self.namespace = policy, namespace
        self.warnings: list[str] = []
        self.gpus: list[_GpuContainer] = []

    def decide(self, pod: Any) -> Decision:
        spec = pod.get("spec") if isinstance(pod, dict) else None
        if not isinstance(spec, dict):
            return Unchanged(warnings=[])
        policy, warnings = self.policy, self.warnings
        names = policy.legacy_resource_names
        every = containers(spec)
        if len(every) > MAX_CONTAINERS_PER_POD:
            return too_many_containers(len(every), (c for _, c in every), policy)
        known = families(policy)
        found = [(ref, c, f) for ref, c in every if (f := container_families(c, known))]
        if not found and not policy.nvidia.overwrite_env:
            return Unchanged(warnings=[])
        metadata = pod.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise NotConvertible("pod metadata is not a map", code=400)
        skip = _left_alone(metadata or {}, spec, policy)
        if skip:
            return Unchanged(warnings=[skip], left_alone=skip) if found else Unchanged(warnings=[])
        whole = left_to_scheduler(metadata or {}, spec, every, policy)
        if whole:
            return Unchanged(warnings=[whole], left_alone=whole)
        if not found:
            hidden = _hide_ops(every, names, warnings)
            if not hidden:
                return Unchanged(warnings=warnings)
            return Converted(patch=hidden, templates=[], plan=(), warnings=warnings, resources=[])
        # A container naming two families (a GPU and an NPU) gets one claim per family, as
        # legacy HAMi gives it both devices on one node and HAMi-DRA converts it.
        by_container = [
            (ref, c, f, keys) for ref, c, families in found for f, keys in families.items()
        ]
        other = _not_converted(by_container, policy)
        if other is not None:
            if policy.webhook.other_vendors == "leave":
                note = f"left unchanged, on legacy HAMi: {other}"
                return Unchanged(warnings=[note], left_alone=note)
            raise NotConvertible(
                f"{other}; to admit such pods unchanged (they stay on legacy HAMi), set"
                " hamiDraWebhook.otherVendors: leave",
                code=422,
                reason="family-not-converted",
            )
        annotations = _annotations(metadata)
        for ref, container, family, _ in by_container:
            resolved = BY_KEY[family].resolve(ref, container, annotations, policy, warnings)
            self.gpus.append(_GpuContainer(resolved, container))
        _check_pod(spec, every, self.gpus, policy)
        return self._converted(metadata, spec, every)

    def _converted(
        self, metadata: JsonObject | None, spec: JsonObject, every: list[tuple[ContainerRef, Any]]
    ) -> Converted:
        """The patch, templates and plan for the resolved GPU containers."""
        policy, warnings, gpus = self.policy, self.warnings, self.gpus
        init_claims_held = _init_and_app_claims(gpus)
        if init_claims_held:
            warnings.append(INIT_CLAIMS_HELD)
        selectors = _selectors(metadata, gpus, policy, warnings)
        ops: list[patch.PatchOp] = []
        templates: dict[str, JsonObject] = {}
        pod_claims: list[JsonObject] = []
        plan: list[ContainerPlan] = []
        taken = _existing_claim_names(spec)
        records: list[tuple[str, str]] = []
        ops += _strip_ops(gpus)
        claimed: ContainerRef | None = None  # the container last given a claim (families adjoin)
        for gpu in gpus:
            planned, ask, record = gpu.plan, gpu.plan.ask, gpu.record
            if gpu.share is not None:  # NVIDIA's share, asked of its driver like any family's
                ask = nvidia.device_ask(gpu.share, selectors, gpu.ref, policy)
                record = legacy_record(gpu.request, policy)
            if ask is not None:
                template = ask_template(ask, record, policy, self.namespace)
                template_name = template["metadata"]["name"]
                templates.setdefault(template_name, template)
                claim = claim_name(gpu.ref.name, taken)
                pod_claims.append({"name": claim, "resourceClaimTemplateName": template_name})
                ops.append(_container_claim_op(gpu, claim, gpu.ref == claimed))
                claimed = gpu.ref
                warnings.append(f"{gpu.ref.label}: {ask.summary} -> {template_name}")
                records.append((gpu.ref.name, record))
                planned = ContainerPlan(
                    gpu.ref, gpu.request, gpu.share, template_name, claim, planned.family, ask
                )
            plan.append(planned)
            if planned.family == NVIDIA:
                ops += _env_ops(gpu.ref, gpu.container, _gpu_env(gpu, policy), warnings)
        names = policy.legacy_resource_names
        if policy.nvidia.overwrite_env:
            ops += _hide_ops(every, names, warnings)
        runtime_class = _runtime_class(gpus)
        ops += _pod_ops(
            metadata, spec, pod_claims, any(g.is_gpu for g in gpus), runtime_class, policy, warnings
        )
        if records:
            ops += _annotation_ops(metadata, CONVERTED_FROM_ANNOTATION, converted_from(records))
        used = {key for gpu in gpus for key in (*gpu.request.in_limits, *gpu.request.in_requests)}
        resources = [name for name in names if name in used]
        resources += sorted(used.difference(names))
        return Converted(
            patch=ops,
            templates=_within_bounds(list(templates.values())),
            plan=tuple(plan),
            warnings=warnings,
            resources=resources,
            init_claims_held=init_claims_held,
        )


def _not_converted(
    by_container: list[tuple[ContainerRef, Any, str, list[str]]], policy: Policy
) -> str | None:
    """Why the pod cannot move to DRA when a container names a family that is not converted
    (naming the resources that container asks for)."""
    known = families(policy)
    for ref, _, key, asked in by_container:
        family = known.get(key)
        if not family.converted:
            return f"{ref.label}: {family.not_converted(asked)}"
    return None


def _annotations(metadata: JsonObject | None) -> JsonObject:
    annotations = (metadata or {}).get("annotations")
    return annotations if isinstance(annotations, dict) else {}


def _runtime_class(gpus: list[_GpuContainer]) -> str:
    """The runtimeClassName converted devices need: NVIDIA's (nvidia.runtimeClassName) and
    another family's (Ascend's) must agree, or the pod cannot run both."""
    wanted = {gpu.runtime_class for gpu in gpus if gpu.runtime_class and gpu.is_gpu}
    if len(wanted) > 1:
        raise NotConvertible(
            f"the pod's devices need different runtime classes ({', '.join(sorted(wanted))});"
            " a pod has one: split it into one pod per device family",
            code=422,
            reason="runtime-classes-differ",
        )
    return next(iter(wanted), "")


def _selectors(
    metadata: JsonObject | None, gpus: list[_GpuContainer], policy: Policy, warnings: list[str]
) -> tuple[str, ...]:
    """The CEL selectors of the pod's GPU type and UUID annotations (shares only)."""
    if not any(gpu.share for gpu in gpus):
        return ()
    annotations = (metadata or {}).get("annotations")
    devices = device_filter(annotations if isinstance(annotations, dict) else {}, policy)
    warnings += devices.warnings
    return devices.selectors


def _within_bounds(templates: list[JsonObject]) -> list[JsonObject]:
    """Bounds on what one admission may write to the cluster: templates are created before
    the answer, by whoever may create a pod (or reach the webhook)."""
    if len(templates) > MAX_TEMPLATES_PER_POD:
        raise NotConvertible(
            f"the pod needs {len(templates)} ResourceClaimTemplates (one for each distinct GPU"
            f" request); at most {MAX_TEMPLATES_PER_POD} are made for one pod: give its GPU"
            " containers identical requests, or split the pod",
            code=422,
            reason="too-many-templates",
        )
    size = len(orjson.dumps(templates))
    if size > MAX_TEMPLATE_BYTES_PER_POD:
        raise NotConvertible(
            f"the pod's ResourceClaimTemplates would take {size} bytes; at most"
            f" {MAX_TEMPLATE_BYTES_PER_POD} are written for one pod: list fewer GPU UUIDs or"
            " types in its annotations",
            code=422,
            reason="templates-too-large",
        )
    return templates


def _hide_ops(
    every: list[tuple[ContainerRef, Any]], names: tuple[str, ...], warnings: list[str]
) -> list[patch.PatchOp]:
    """overwriteEnv: as legacy HAMi, every container without a GPU request gets
    NVIDIA_VISIBLE_DEVICES=none, so that an nvidia default runtime shows it no GPU."""
    ops: list[patch.PatchOp] = []
    for ref, container in every:
        if not has_legacy_keys(container, names) and _hideable(container):
            ops += _env_ops(ref, container, {VISIBLE_DEVICES_ENV: "none"}, warnings)
    return ops


def _hideable(container: Any) -> bool:
    """A container overwriteEnv gives NVIDIA_VISIBLE_DEVICES=none: a map (anything else is for
    kube-apiserver's validation to refuse) that uses no DRA claim (a claim may hold a GPU: ours,
    once converted)."""
    if not isinstance(container, dict):
        return False
    resources = container.get("resources")
    return not (isinstance(resources, dict) and resources.get("claims"))


def _left_alone(metadata: JsonObject, spec: JsonObject, policy: Policy) -> str | None:
    labels = metadata.get("labels")
    if isinstance(labels, dict) and labels.get(OPT_OUT_LABEL) == "ignore":
        return f"left unchanged: label {OPT_OUT_LABEL}=ignore opts this pod out (as legacy HAMi)"
    scheduler = spec.get("schedulerName")
    if scheduler not in DEFAULT_SCHEDULERS and scheduler != policy.webhook.legacy_scheduler_name:
        return (
            f"left unchanged: schedulerName {scheduler!s} handles its own GPUs (as legacy HAMi);"
            " legacy GPU resources kept"
        )
    return None


def _init_and_app_claims(gpus: list[_GpuContainer]) -> bool:
    lists = {gpu.ref.list_name for gpu in gpus if gpu.share is not None}
    return lists == {"initContainers", "containers"}


def _check_pod(
    spec: JsonObject,
    every: list[tuple[ContainerRef, Any]],
    gpus: list[_GpuContainer],
    policy: Policy,
) -> None:
    _check_unique_names(every)
    if policy.webhook.refuse_privileged:
        for ref, container in every:
            context = container.get("securityContext") if isinstance(container, dict) else None
            if isinstance(context, dict) and context.get("privileged") is True:
                raise NotConvertible(
                    f"{ref.label} is privileged in a pod that requests GPUs: a privileged"
                    " container sees every GPU; drop privileged or set"
                    " hamiDraWebhook.refusePrivileged: false",
                    code=403,
                )
    node = spec.get("nodeName")
    if node and any(gpu.is_gpu for gpu in gpus):
        raise NotConvertible(
            f"the pod sets spec.nodeName {node!s} and requests GPUs, which must be allocated by"
            " the scheduler; remove nodeName (use a nodeSelector instead)",
            code=422,
        )


def _check_unique_names(every: list[tuple[ContainerRef, Any]]) -> None:
    """kube-apiserver refuses a pod whose containers share a name, but only after mutating
    admission: refuse it here, before naming claims after them."""
    seen: set[str] = set()
    for _, container in every:
        name = container.get("name") if isinstance(container, dict) else None
        if not isinstance(name, str):
            continue  # not a container, or no name: kube-apiserver's validation says so
        if name in seen:
            raise NotConvertible(
                f'more than one container is named "{name}"; kube-apiserver refuses such a'
                " pod: give every container (init containers included) a name of its own",
                code=422,
            )
        seen.add(name)


def _existing_claim_names(spec: JsonObject) -> Taken:
    claims = spec.get("resourceClaims")
    if claims is None:
        return Taken()
    if not isinstance(claims, list):
        raise NotConvertible("spec.resourceClaims is not a list", code=400)
    return Taken(
        {c["name"] for c in claims if isinstance(c, dict) and isinstance(c.get("name"), str)}
    )


def _strip_ops(gpus: list[_GpuContainer]) -> list[patch.PatchOp]:
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


def _ref(gpu: _GpuContainer) -> ContainerRef:
    return gpu.ref


def _container_claim_op(gpu: _GpuContainer, claim: str, appended: bool) -> patch.PatchOp:
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
        raise NotConvertible(f"{gpu.ref.label}: resources.claims is not a list", code=400)
    return patch.add(patch.pointer(*path, "-"), {"name": claim})


def _gpu_env(gpu: _GpuContainer, policy: Policy) -> dict[str, str]:
    env = {}
    if gpu.share is None and policy.nvidia.overwrite_env:
        # No device (count 0, or no count with defaultGPUNum 0): hidden like a CPU container.
        env[VISIBLE_DEVICES_ENV] = "none"
    if gpu.request.priority is not None:
        env[TASK_PRIORITY_ENV] = str(gpu.request.priority)
    if gpu.share is not None:
        if policy.nvidia.gpu_core_policy != "default":
            env[CORE_POLICY_ENV] = policy.nvidia.gpu_core_policy
        if policy.nvidia.lib_cuda_log_level is not None:
            env[LOG_LEVEL_ENV] = str(policy.nvidia.lib_cuda_log_level)
    return env


def _env_ops(
    ref: ContainerRef, container: Any, wanted: dict[str, str], warnings: list[str]
) -> list[patch.PatchOp]:
    if not wanted:
        return []
    env = container.get("env")
    if env is not None and not isinstance(env, list):
        raise NotConvertible(f"{ref.label}: env is not a list", code=400)
    present: dict[str, Any] = {}
    for index, entry in enumerate(env or []):
        if not isinstance(entry, dict):
            raise NotConvertible(f"{ref.label}: env[{index}] is not a map", code=400)
        name = entry.get("name")
        if not isinstance(name, str):
            raise NotConvertible(f"{ref.label}: env[{index}].name is not a string", code=400)
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


def _annotation_ops(metadata: JsonObject | None, key: str, value: str) -> list[patch.PatchOp]:
    """Set one annotation (after _pod_ops, which gives the pod its metadata if it had none)."""
    annotations = None if metadata is None else metadata.get("annotations")
    if annotations is None:
        return [patch.add("/metadata/annotations", {key: value})]
    if not isinstance(annotations, dict):
        raise NotConvertible("metadata.annotations is not a map", code=400)
    return [patch.add(patch.pointer("metadata", "annotations", key), value)]


def _pod_ops(
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
        raise NotConvertible("metadata.labels is not a map", code=400)
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
