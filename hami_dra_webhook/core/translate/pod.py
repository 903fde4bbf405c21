"""`translate_pod`: one pod dict in, a `Decision` (converted, unchanged or refused) out."""

from __future__ import annotations

from typing import Any

from hami_dra_webhook.core.legacy.selectors import device_filter
from hami_dra_webhook.core.model import patch
from hami_dra_webhook.core.model.containers import containers
from hami_dra_webhook.core.model.types import ContainerRef, JsonObject, NotConvertible
from hami_dra_webhook.core.outcome.ask import DeviceAsk
from hami_dra_webhook.core.outcome.decision import (
    INIT_CLAIMS_HELD,
    Claimed,
    ContainerPlan,
    Converted,
    Decision,
    Refusal,
    Unchanged,
)
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.translate.claims import (
    CONVERTED_FROM_ANNOTATION,
    ask_template,
    claim_name,
    converted_from,
)
from hami_dra_webhook.core.translate.gpu_container import GpuContainer
from hami_dra_webhook.core.translate.pod_checks import (
    MAX_CONTAINERS_PER_POD,
    check_pod,
    check_pod_level_resources,
    existing_claim_names,
    init_and_app_claims,
    left_alone,
    pod_runtime_class,
    too_many_containers,
    within_bounds,
)
from hami_dra_webhook.core.translate.pod_patch import (
    annotation_ops,
    container_claim_op,
    env_ops,
    hide_ops,
    pod_ops,
    strip_ops,
)
from hami_dra_webhook.core.translate.whole_gpus import left_to_scheduler
from hami_dra_webhook.core.vendors.families import (
    BY_KEY,
    Families,
    container_families,
    families,
)


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


class _Translation:
    """One pod's translation: what it has said (warnings) and understood (the GPU containers
    resolved so far, which a refusal reports) while it decides."""

    def __init__(self, policy: Policy, namespace: str | None) -> None:
        self.policy, self.namespace = policy, namespace
        self.warnings: list[str] = []
        self.gpus: list[GpuContainer] = []

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
        check_pod_level_resources(spec, known)
        found = [(ref, c, f) for ref, c in every if (f := container_families(c, known))]
        if not found and not policy.nvidia.overwrite_env:
            return Unchanged(warnings=[])
        metadata = pod.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise NotConvertible("pod metadata is not a map", code=400, reason="malformed-pod")
        skip = left_alone(metadata or {}, spec, policy)
        if skip:
            return Unchanged(warnings=[skip], left_alone=skip) if found else Unchanged(warnings=[])
        whole = left_to_scheduler(metadata or {}, spec, every, policy)
        if whole:
            return Unchanged(warnings=[whole], left_alone=whole)
        if not found:
            hidden = hide_ops(every, names, warnings)
            if not hidden:
                return Unchanged(warnings=warnings)
            return Converted(patch=hidden, templates=[], plan=(), warnings=warnings, resources=[])
        # A container naming two families (a GPU and an NPU) gets one claim per family, as
        # legacy HAMi gives it both devices on one node and HAMi-DRA converts it.
        by_container = [
            (ref, c, f, keys) for ref, c, families in found for f, keys in families.items()
        ]
        other = _not_converted(by_container, known)
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
            self.gpus.append(GpuContainer(resolved, container))
        check_pod(spec, every, self.gpus, policy)
        return self._converted(metadata, spec, every)

    def _converted(
        self, metadata: JsonObject | None, spec: JsonObject, every: list[tuple[ContainerRef, Any]]
    ) -> Converted:
        """The patch, templates and plan for the resolved GPU containers."""
        policy, warnings, gpus = self.policy, self.warnings, self.gpus
        init_claims_held = init_and_app_claims(gpus)
        if init_claims_held:
            warnings.append(INIT_CLAIMS_HELD)
        selectors = _selectors(metadata, gpus, policy, warnings)
        ops: list[patch.PatchOp] = []
        templates: dict[str, JsonObject] = {}
        pod_claims: list[JsonObject] = []
        plan: list[ContainerPlan] = []
        taken = existing_claim_names(spec)
        records: list[tuple[str, str]] = []
        ops += strip_ops(gpus)
        claimed: ContainerRef | None = None  # the container last given a claim (families adjoin)
        for gpu in gpus:
            planned, record = gpu.plan, gpu.record
            profile = BY_KEY[planned.family]
            ask = profile.device_ask(planned, selectors, policy)
            if ask is not None:
                template = ask_template(ask, record, policy, self.namespace)
                template_name = template["metadata"]["name"]
                templates.setdefault(template_name, template)
                claim = claim_name(gpu.ref.name, taken)
                pod_claims.append({"name": claim, "resourceClaimTemplateName": template_name})
                ops.append(container_claim_op(gpu, claim, gpu.ref == claimed))
                claimed = gpu.ref
                warnings.append(f"{gpu.ref.label}: {ask.summary} -> {template_name}")
                records.append((gpu.ref.shown, record))
                planned = _with_claim(planned, template_name, claim, ask)
            plan.append(planned)
            ops += env_ops(gpu.ref, gpu.container, profile.environment(gpu.plan, policy), warnings)
        names = policy.legacy_resource_names
        if policy.nvidia.overwrite_env:
            ops += hide_ops(every, names, warnings)
        runtime_class = pod_runtime_class(gpus)
        ops += pod_ops(
            metadata, spec, pod_claims, any(g.is_gpu for g in gpus), runtime_class, policy, warnings
        )
        if records:
            ops += annotation_ops(metadata, CONVERTED_FROM_ANNOTATION, converted_from(records))
        return Converted(
            patch=ops,
            templates=within_bounds(list(templates.values())),
            plan=tuple(plan),
            warnings=warnings,
            resources=_legacy_resources(gpus, names),
            init_claims_held=init_claims_held,
        )


def _with_claim(planned: ContainerPlan, template: str, claim: str, ask: DeviceAsk) -> ContainerPlan:
    """The plan with its template, claim and device ask (made anew: a plan is immutable)."""
    return ContainerPlan(
        planned.ref,
        planned.request,
        planned.wants,
        planned.family,
        Claimed(template, claim, ask),
        planned.notes,
    )


def _legacy_resources(gpus: list[GpuContainer], names: tuple[str, ...]) -> list[str]:
    """The legacy resources the pod asked for: NVIDIA's in their configured order, then the
    others sorted (the metrics count conversions by them)."""
    used = {key for gpu in gpus for key in (*gpu.request.in_limits, *gpu.request.in_requests)}
    return [name for name in names if name in used] + sorted(used.difference(names))


def _not_converted(
    by_container: list[tuple[ContainerRef, Any, str, list[str]]], known: Families
) -> str | None:
    """Why the pod cannot move to DRA when a container names a family that is not converted
    (naming the resources that container asks for)."""
    for ref, _, key, asked in by_container:
        family = known.get(key)
        if not family.converted:
            return f"{ref.label}: {family.not_converted(asked)}"
    return None


def _annotations(metadata: JsonObject | None) -> JsonObject:
    annotations = (metadata or {}).get("annotations")
    return annotations if isinstance(annotations, dict) else {}


def _selectors(
    metadata: JsonObject | None, gpus: list[GpuContainer], policy: Policy, warnings: list[str]
) -> tuple[str, ...]:
    """The CEL selectors of the pod's GPU type and UUID annotations, where a container's
    family reads them (NVIDIA's shares)."""
    if not any(BY_KEY[gpu.plan.family].reads_pod_selectors(gpu.plan) for gpu in gpus):
        return ()
    annotations = (metadata or {}).get("annotations")
    devices = device_filter(annotations if isinstance(annotations, dict) else {}, policy)
    warnings += devices.warnings
    return devices.selectors
