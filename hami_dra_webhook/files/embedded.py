"""Pod templates inside objects that are not built-in workloads (custom resources), and the
container-shaped maps an operator turns into a pod's container (KServe's `predictor.model`,
Kubeflow Trainer's `trainer.resourcesPerNode`): what their pods look like at admission, and how
a patch of that pod maps back onto the object (docs/kubernetes-facts.md: operators)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from hami_dra_webhook.core.model import patch
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.workloads.volcano_jobs import (
    as_admitted,
    is_volcano_job,
    owner_scheduler,
)
from hami_dra_webhook.files.manifests import api_group, pod_template
from hami_dra_webhook.files.operators import SchedulerSource, own_spec_left, scheduler_source

PathPart = str | int

# How deep pod templates are looked for inside other objects (custom resources nest them a
# few levels: a RayCluster's workerGroupSpecs[*].template is at depth 4).
MAX_EMBEDDED_DEPTH = 16

# KServe (serving.kserve.io InferenceService): each component (predictor, transformer,
# explainer) is a pod spec inline, with the pod's labels and annotations beside it; its model
# (or a framework shorthand: sklearn, pytorch, ...) is the container KServe names
# kserve-container, put first.
KSERVE_GROUP = "serving.kserve.io"
KSERVE_COMPONENTS = ("predictor", "transformer", "explainer")
KSERVE_CONTAINER_KEYS = (
    "model",
    "sklearn",
    "xgboost",
    "tensorflow",
    "pytorch",
    "triton",
    "onnx",
    "huggingface",
    "pmml",
    "lightgbm",
    "paddle",
    "art",
    "alibi",
)
KSERVE_CONTAINER = "kserve-container"
# Kubeflow Trainer v2 (trainer.kubeflow.org TrainJob): spec.trainer.resourcesPerNode is the
# resources of the runtime's container named "node", one pod per node.
TRAINER_GROUP = "trainer.kubeflow.org"
TRAINER_CONTAINER = "node"
TRAINER_LEFT = (
    "a TrainJob's trainer.resourcesPerNode has no place for claims (they would go in the"
    " runtime's pod template), so it is left as it is even with --embedded: its pods are"
    " converted when they are created"
)


@dataclass(frozen=True, slots=True)
class EmbeddedPod:
    """A pod template inside an object that is not a built-in workload (a LeaderWorkerSet's
    leaderWorkerTemplate.workerTemplate, a RayCluster's workerGroupSpecs[0].template, a
    Volcano Job's tasks[0].template): its controller creates pods from it, which the webhook
    converts at admission. `bare`: a pod spec without the template around it (no metadata).

    A container-shaped map (KServe's predictor.model) is one too: `pod` is then the pod its
    operator makes of the map and what holds it, `holder` the path of that holder and
    `container_key` the map's key in it; `left` says why --embedded cannot rewrite it."""

    path: tuple[PathPart, ...]
    pod: JsonObject
    bare: bool = False
    # The scheduler its owner gives pods whose template names none (a Volcano Job's), or None.
    owner_scheduler: str | None = None
    # Volcano's schedulers, when the webhook converts Volcano Jobs at their admission
    # (--volcano-jobs convert): their task templates are judged as pods that are converted.
    dra_schedulers: frozenset[str] = frozenset()
    holder: tuple[PathPart, ...] | None = None
    container_key: str = ""
    left: str = ""
    # Where the owner names that scheduler, and whether it replaces the template's own
    # (files/operators.py); None: only a Volcano Job's default, or no owner scheduler.
    owner: SchedulerSource | None = None
    # False: the pods' labels and annotations do not come from this template's metadata (an
    # object whose own spec is the pod spec): the webhook's label and annotation have no place.
    metadata_reaches: bool = True

    @property
    def where(self) -> str:
        """The path as kubectl explain writes it: spec.tasks[0].template."""
        text = ""
        for part in self.path:
            text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else part
        return text or "(the object itself)"

    @property
    def inherits_scheduler(self) -> bool:
        """The pods get the owner's scheduler: the template names none, or the owner's
        replaces it."""
        if not self.owner_scheduler:
            return False
        if self.owner is not None and self.owner.overrides:
            return True
        spec = self.pod.get("spec")
        return not (isinstance(spec, dict) and spec.get("schedulerName"))

    @property
    def inherited(self) -> str:
        """Where the scheduler its pods get comes from, in words ("" when from the template)."""
        if not self.inherits_scheduler:
            return ""
        where = self.owner.where if self.owner is not None else "schedulerName"
        return f"its pods take their owner's {where} {self.owner_scheduler}"

    @property
    def admitted(self) -> JsonObject:
        """The pod as its controller creates it, as far as admission reads it: with the
        owner's scheduler where the template names none (a shallow copy; the template is not
        changed)."""
        if self.dra_schedulers and self.owner_scheduler:
            # A template naming another scheduler (HAMi's too) is judged as it is, below.
            judged = as_admitted(self.pod, self.owner_scheduler, self.dra_schedulers, "")
            if judged is not None:
                return judged
        if not self.inherits_scheduler:
            return self.pod
        spec = self.pod.get("spec")
        return {**self.pod, "spec": {**(spec or {}), "schedulerName": self.owner_scheduler}}

    def in_object(self, ops: list[patch.PatchOp]) -> list[patch.PatchOp]:
        """A patch of `pod` as a patch of the object holding it."""
        if self.holder is None:
            return patch.rebase(ops, patch.pointer(*self.path)) if self.path else ops
        holder, key = patch.pointer(*self.holder), self.container_key
        return [{**op, "path": _component_path(op["path"], holder, key)} for op in ops]


_FIRST_CONTAINER = re.compile(r"^/spec/containers/(\d+)(?=/|$)")


def _component_path(path: str, holder: str, key: str) -> str:
    """Where a path of the pod made of a KServe component is in the object: the pod's metadata
    labels and annotations are the component's, its first container is the model, the others
    the component's own containers, the rest of its spec the component."""
    if path.startswith("/metadata/"):
        return holder + path[len("/metadata") :]
    container = _FIRST_CONTAINER.match(path) if key else None
    if container is not None:
        index, rest = int(container.group(1)), path[container.end() :]
        if index == 0:
            return f"{holder}/{patch.escape(key)}{rest}"
        return f"{holder}/containers/{index - 1}{rest}"
    if path.startswith("/spec/"):
        return holder + path[len("/spec") :]
    raise ValueError(f"no place in a KServe component for {path}")


def embedded_pods(document: Any, dra_schedulers: frozenset[str] = frozenset()) -> list[EmbeddedPod]:
    """Every pod template inside an object other than a built-in workload: a map whose `spec`
    has a `containers` list (a template), or a map with a `containers` list itself (a bare pod
    spec, found where no template holds it); and the container-shaped maps a known operator
    makes a pod of (KServe's components, Trainer's trainer)."""
    if not isinstance(document, dict) or pod_template(document) is not None:
        return []
    found = _components(document)
    known = {e.holder for e in found if e.holder is not None}
    _look_inside(document, (), found, 0, known, set())
    found = [_own_spec(document, e) if not e.path else e for e in found]
    if is_volcano_job(document):
        # A Volcano Job's pods take its scheduler where their template names none (its job
        # controller's createJobPod; its admission defaults the Job's to volcano).
        scheduler = owner_scheduler(document)
        job = SchedulerSource(scheduler, "spec.schedulerName", False, ("spec", "schedulerName"))
        return [
            replace(e, owner_scheduler=scheduler, dra_schedulers=dra_schedulers, owner=job)
            for e in found
        ]
    source = scheduler_source(document)
    if source is None:
        return found
    return [replace(e, owner_scheduler=source.name, owner=source) for e in found]


def _own_spec(document: JsonObject, found: EmbeddedPod) -> EmbeddedPod:
    """An object whose own spec is a pod spec: its metadata is its own, not its pods'."""
    return replace(found, metadata_reaches=False, left=found.left or own_spec_left(document))


def _components(document: JsonObject) -> list[EmbeddedPod]:
    group, kind = api_group(document), document.get("kind")
    spec = document.get("spec")
    if not isinstance(spec, dict):
        return []
    if group == KSERVE_GROUP and kind == "InferenceService":
        found = []
        for name in KSERVE_COMPONENTS:
            component = spec.get(name)
            if not isinstance(component, dict):
                continue
            keys = [k for k in KSERVE_CONTAINER_KEYS if isinstance(component.get(k), dict)]
            if keys:
                found += [_kserve(("spec", name), component, key) for key in keys]
            elif isinstance(component.get("containers"), list):
                found.append(_kserve(("spec", name), component, ""))
        return found
    trainer = spec.get("trainer")
    if group == TRAINER_GROUP and kind == "TrainJob" and isinstance(trainer, dict):
        resources = trainer.get("resourcesPerNode")
        if isinstance(resources, dict):
            container: JsonObject = {"name": TRAINER_CONTAINER, "resources": resources}
            if isinstance(trainer.get("env"), list):
                container["env"] = trainer["env"]
            pod: JsonObject = {"spec": {"containers": [container]}}
            return [
                EmbeddedPod(
                    ("spec", "trainer", "resourcesPerNode"),
                    pod,
                    bare=True,
                    holder=("spec", "trainer"),
                    left=TRAINER_LEFT,
                )
            ]
    return []


def _kserve(holder: tuple[str, ...], component: JsonObject, key: str) -> EmbeddedPod:
    """The pod KServe makes of one component whose container is `component[key]` (key "":
    the component's own containers list)."""
    skip = {*KSERVE_CONTAINER_KEYS, "labels", "annotations"}
    spec: JsonObject = {k: v for k, v in component.items() if k not in skip}
    if key:
        own = component.get("containers")
        spec["containers"] = [
            # KServe names it so whatever the map says (`name: ""` is common).
            {**component[key], "name": KSERVE_CONTAINER},
            *(own if isinstance(own, list) else []),
        ]
    metadata = {k: component[k] for k in ("labels", "annotations") if k in component}
    path = (*holder, key) if key else holder
    return EmbeddedPod(path, {"metadata": metadata, "spec": spec}, holder=holder, container_key=key)


def _look_inside(
    node: Any,
    path: tuple[PathPart, ...],
    found: list[EmbeddedPod],
    depth: int,
    known: set[tuple[PathPart, ...]],
    walked: set[int],
) -> None:
    """Every pod template under `node`, each map and list walked once: YAML aliases make one
    object appear under many paths (ten aliases of ten aliases, eight deep, are 10^8 paths
    to one list), and a template reached again through an alias is the same text, found once."""
    if depth > MAX_EMBEDDED_DEPTH or path in known or id(node) in walked:
        return
    walked.add(id(node))
    if isinstance(node, dict):
        spec = node.get("spec")
        if isinstance(spec, dict) and isinstance(spec.get("containers"), list):
            found.append(EmbeddedPod(path, node))
            return
        if path and isinstance(node.get("containers"), list):
            found.append(EmbeddedPod(path, {"spec": node}, bare=True))
            return
        for key, value in node.items():
            if isinstance(value, dict | list) and not (not path and key == "metadata"):
                _look_inside(value, (*path, str(key)), found, depth + 1, known, walked)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            if isinstance(value, dict | list):
                _look_inside(value, (*path, index), found, depth + 1, known, walked)
