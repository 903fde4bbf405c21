"""What refuses or leaves a pod as a whole, before or after its containers are resolved: the
opt-out and other schedulers, container names, privileged containers, nodeName, runtime
classes, existing claim names, and the bounds on what one admission may write."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from hami_dra_webhook.core.model.types import ContainerRef, JsonObject, NotConvertible
from hami_dra_webhook.core.outcome.decision import Decision, Refusal, Unchanged
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.translate.claims import Taken
from hami_dra_webhook.core.translate.gpu_container import GpuContainer
from hami_dra_webhook.core.translate.pod_view import OPT_OUT_LABEL
from hami_dra_webhook.core.vendors.families import Families, container_families, names_a_family

# What one admission may write: a pod with more distinct GPU requests than this is not a
# legacy manifest, and each template is created before the answer.
MAX_TEMPLATES_PER_POD = 16


# More containers than a GPU pod stored by kube-apiserver can have (a defaulted container is
# over 150 bytes of JSON; etcd's default limit is 1.5 MiB an object): only a direct caller
# sends more, and each costs translation time.
MAX_CONTAINERS_PER_POD = 10_000


MAX_TEMPLATE_BYTES_PER_POD = 256 * 1024


DEFAULT_SCHEDULERS = (None, "", "default-scheduler")


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
            reason="too-many-containers",
        )
    return Unchanged(warnings=[])


def pod_runtime_class(gpus: list[GpuContainer]) -> str:
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


def within_bounds(templates: list[JsonObject]) -> list[JsonObject]:
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


def left_alone(metadata: JsonObject, spec: JsonObject, policy: Policy) -> str | None:
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


def init_and_app_claims(gpus: list[GpuContainer]) -> bool:
    lists = {gpu.ref.list_name for gpu in gpus if gpu.share is not None}
    return lists == {"initContainers", "containers"}


def check_pod(
    spec: JsonObject,
    every: list[tuple[ContainerRef, Any]],
    gpus: list[GpuContainer],
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
                    reason="privileged-container",
                )
    node = spec.get("nodeName")
    if node and any(gpu.is_gpu for gpu in gpus):
        raise NotConvertible(
            f"the pod sets spec.nodeName {node!s} and requests GPUs, which must be allocated by"
            " the scheduler; remove nodeName (use a nodeSelector instead)",
            code=422,
            reason="node-name-set",
        )


def check_pod_level_resources(spec: JsonObject, known: Families) -> None:
    """Pod-level `spec.resources` takes only cpu, memory and hugepages (kube-apiserver says
    "Unsupported value" after admission), and no claims (1.38: "claims may not be set for
    Resources at pod-level"): a GPU resource there is refused here, with what to write."""
    resources = spec.get("resources")
    named = container_families({"resources": resources}, known) if resources else {}
    if named:
        keys = ", ".join(key for family_keys in named.values() for key in family_keys)
        raise NotConvertible(
            f"pod-level resources (spec.resources) name {keys}: Kubernetes takes only cpu,"
            " memory and hugepages there, and DRA claims only per container; move them to the"
            " resources of the container that uses the GPU",
            code=422,
            reason="pod-level-gpu-resources",
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
                reason="duplicate-container-names",
            )
        seen.add(name)


def existing_claim_names(spec: JsonObject) -> Taken:
    claims = spec.get("resourceClaims")
    if claims is None:
        return Taken()
    if not isinstance(claims, list):
        raise NotConvertible("spec.resourceClaims is not a list", code=400, reason="malformed-pod")
    return Taken(
        {c["name"] for c in claims if isinstance(c, dict) and isinstance(c.get("name"), str)}
    )
