"""A Volcano Job (`batch.volcano.sh`) converted at its own admission: its task templates, as
the pods its controller creates from them (docs/kubernetes-facts.md: Volcano).

Why the Job and not its pods: the Job's PodGroup takes its `minResources` from the task
templates, and Volcano queues the Job on them (v1.15 counts claims in a Queue's quota by
DeviceClass). Templates that keep `nvidia.com/gpumem` would queue the Job on resources no DRA
node offers; converted templates give it claims, which Volcano's scheduler allocates (its
predicates plugin runs kube-scheduler's DynamicResources when DRA is enabled in its
configuration). The pods then arrive converted, and the pod webhook has nothing to do."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hami_dra_webhook.core.migration.pools import Scope, template_labels
from hami_dra_webhook.core.model import patch
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.outcome.decision import Converted, Decision, Refusal, Unchanged

GROUP = "batch.volcano.sh"
KIND = "Job"
DEFAULT_SCHEDULER = "volcano"  # what Volcano's admission gives a Job that names none
# Schedulers whose pods are converted with the Job: kube-scheduler's (the pod webhook would
# convert them anyway), HAMi's (removed, as from any pod) and Volcano's own.
_ALWAYS = ("", "default-scheduler")
ALL = Scope("all")


def is_volcano_job(document: Any) -> bool:
    if not isinstance(document, dict) or document.get("kind") != KIND:
        return False
    version = document.get("apiVersion")
    return isinstance(version, str) and version.rpartition("/")[0] == GROUP


def owner_scheduler(job: JsonObject) -> str:
    """The Job's scheduler: what its pods get when their template names none."""
    spec = job.get("spec")
    owner = spec.get("schedulerName") if isinstance(spec, dict) else None
    return owner if isinstance(owner, str) and owner else DEFAULT_SCHEDULER


def job_decision(
    job: JsonObject,
    decide: Callable[[JsonObject], Decision],
    volcano_schedulers: frozenset[str],
    legacy_scheduler: str,
    scope: Scope = ALL,
) -> Decision:
    """The Job's decision: each task template whose pods Volcano (or kube-scheduler) schedules
    decided by `decide` as its pods would be, the patches put together. A task refused refuses
    the Job, naming the task; templates of another scheduler, or that the migration `scope`
    leaves to legacy HAMi (its opt-in and opt-out labels, read on the template: the Job's
    webhook sees only the Job's), are left (as their pods are)."""
    spec = job.get("spec")
    tasks = spec.get("tasks") if isinstance(spec, dict) else None
    if not isinstance(tasks, list):
        return Unchanged(warnings=[])
    owner = owner_scheduler(job)
    ops: list[patch.PatchOp] = []
    templates: dict[str, JsonObject] = {}
    warnings: list[str] = []
    plans: list[Any] = []
    resources: list[str] = []
    for index, task in enumerate(tasks):
        template = task.get("template") if isinstance(task, dict) else None
        if not isinstance(template, dict):
            continue
        name = task.get("name") if isinstance(task.get("name"), str) else str(index)
        if not scope.selects_pod(template_labels(template)):
            continue  # its pods are left alone by the pod webhook too
        judged = as_admitted(template, owner, volcano_schedulers, legacy_scheduler)
        if judged is None:
            continue
        decision = decide(judged)
        if isinstance(decision, Refusal):
            return Refusal(
                code=decision.code,
                message=f"task {name!r}: {decision.message}",
                warnings=[f"task {name!r}: {w}" for w in decision.warnings],
                reason=decision.reason,
            )
        if not isinstance(decision, Converted):
            warnings += [f"task {name!r}: {w}" for w in decision.warnings]
            continue
        summaries = set(decision.summaries)
        warnings += [w if w in summaries else f"task {name!r}: {w}" for w in decision.warnings]
        ops += patch.rebase(decision.patch, patch.pointer("spec", "tasks", index, "template"))
        for made in decision.templates:
            templates.setdefault(made["metadata"]["name"], made)
        plans += decision.plan
        resources += [r for r in decision.resources if r not in resources]
    if not ops:
        return Unchanged(warnings=warnings)
    return Converted(
        patch=ops,
        templates=list(templates.values()),
        plan=tuple(plans),
        warnings=warnings,
        resources=resources,
    )


def as_admitted(
    template: JsonObject, owner: str, volcano: frozenset[str], legacy_scheduler: str
) -> JsonObject | None:
    """The template as its pods are judged when the Job is converted (Volcano's scheduler name
    taken off, since it allocates claims), or None when another scheduler takes its pods."""
    spec = template.get("spec")
    own = spec.get("schedulerName") if isinstance(spec, dict) else None
    scheduler = own if isinstance(own, str) and own else owner
    if scheduler in _ALWAYS or scheduler == legacy_scheduler:
        return template
    if scheduler not in volcano:
        return None
    if not own:
        return template
    assert isinstance(spec, dict)
    return {**template, "spec": {k: v for k, v in spec.items() if k != "schedulerName"}}
