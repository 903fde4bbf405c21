"""What known operators copy from their own object onto the pods they create, beyond the pod
template: the scheduler (named on the object, which may replace the template's) and where the
pods' labels and annotations come from (docs/migration.md, "What operators copy to pods").

Checked in each operator's code:
- Volcano Job (`batch.volcano.sh`): `spec.schedulerName` where the task template names none;
  Volcano's admission defaults it to `volcano` (job controller's createJobPod).
- Kthena ModelServing (`workload.serving.volcano.sh`): `spec.schedulerName` on every pod,
  replacing the template's (model-serving-controller utils.GenerateEntryPod/GenerateWorkerPod);
  the CRD defaults it to `volcano`.
- KubeRay RayCluster and RayJob (`ray.io`): the label `ray.io/scheduler-name` asks KubeRay's
  batch scheduler (volcano, yunikorn, scheduler-plugins) to set every pod's schedulerName.
- KServe ServingRuntime and ClusterServingRuntime (`serving.kserve.io`): the object's `spec`
  is the pod spec KServe merges into an InferenceService's predictor; the pods' labels and
  annotations come from `spec.labels` and `spec.annotations`, not from the object's metadata,
  and the spec has no `resourceClaims`.
Any other object whose own `spec` is a pod spec: its metadata is the object's, which no
operator is known to copy to its pods.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hami_dra_webhook.core.model import patch
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.files.manifests import api_group

RAY_SCHEDULER_LABEL = "ray.io/scheduler-name"
DEFAULT_SCHEDULER = "default-scheduler"


@dataclass(frozen=True, slots=True)
class SchedulerSource:
    """Where an object names the scheduler its controller gives its pods."""

    name: str  # the scheduler its pods get
    where: str  # in words: `spec.schedulerName`, `label ray.io/scheduler-name`
    overrides: bool  # replaces the template's own schedulerName (else only where it has none)
    field: tuple[str, ...] = ()  # the object's field that names it
    label: str = ""  # or the object's label that does

    def release(self) -> patch.PatchOp:
        """The op that stops the object giving its pods this scheduler (HAMi's, which leaves
        with legacy HAMi): its field set to kube-scheduler's, its label removed."""
        if self.label:
            return patch.remove(patch.pointer("metadata", "labels", self.label))
        return patch.add(patch.pointer(*self.field), DEFAULT_SCHEDULER)


@dataclass(frozen=True, slots=True)
class _Shape:
    group: str
    kinds: frozenset[str]
    field: tuple[str, ...] = ()
    label: str = ""
    default: str = ""
    overrides: bool = False


_SHAPES = (
    _Shape("workload.serving.volcano.sh", frozenset({"ModelServing"}), ("spec", "schedulerName"),
           default="volcano", overrides=True),
    _Shape("ray.io", frozenset({"RayCluster", "RayJob"}), label=RAY_SCHEDULER_LABEL,
           overrides=True),
)  # fmt: skip

SERVING_RUNTIME_GROUP = "serving.kserve.io"
SERVING_RUNTIMES = frozenset({"ServingRuntime", "ClusterServingRuntime"})
SERVING_RUNTIME_LEFT = (
    "a KServe serving runtime's spec is the pod spec KServe merges into each InferenceService's"
    " predictor: it has no resourceClaims, and its pods' labels come from spec.labels, not from"
    " its metadata; so it is left as it is even with --embedded: the pods are converted when"
    " they are created (convert the InferenceServices, or leave both to the webhook)"
)


def scheduler_source(document: Any) -> SchedulerSource | None:
    """The scheduler an object other than a Volcano Job names for its pods (Volcano Jobs:
    core/workloads/volcano_jobs.py), or None."""
    if not isinstance(document, dict):
        return None
    group, kind = api_group(document), document.get("kind")
    for shape in _SHAPES:
        if group != shape.group or kind not in shape.kinds:
            continue
        if shape.label:
            labels = (document.get("metadata") or {}).get("labels")
            value = labels.get(shape.label) if isinstance(labels, dict) else None
            if not isinstance(value, str) or not value:
                return None
            where = f"label {shape.label}"
            return SchedulerSource(value, where, shape.overrides, label=shape.label)
        value = _at(document, shape.field)
        name = value if isinstance(value, str) and value else shape.default
        if not name:
            return None
        return SchedulerSource(name, ".".join(shape.field), shape.overrides, field=shape.field)
    return None


def own_spec_left(document: JsonObject) -> str:
    """Why an object whose own spec is a pod spec cannot be rewritten ("" when it can)."""
    if api_group(document) == SERVING_RUNTIME_GROUP and document.get("kind") in SERVING_RUNTIMES:
        return SERVING_RUNTIME_LEFT
    return ""


def _at(document: JsonObject, path: tuple[str, ...]) -> Any:
    node: Any = document
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
    return node
