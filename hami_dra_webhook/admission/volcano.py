"""POST /mutate-volcano-jobs: a Volcano Job converted at its admission (core/volcano_jobs.py
says why the Job and not its pods), with the pod webhook's policy, cache, namespaces and
template store."""

from __future__ import annotations

from hami_dra_webhook.admission.mutator import (
    MutationRecord,
    PodMutator,
    audit_annotations,
    mutation_record,
)
from hami_dra_webhook.core import review
from hami_dra_webhook.core.decision import (
    Converted,
    Decision,
    Unchanged,
    excluded_namespace,
)
from hami_dra_webhook.core.types import JsonObject
from hami_dra_webhook.core.volcano_jobs import is_volcano_job, job_decision

_UNCHANGED = Unchanged(warnings=[])


async def mutate_volcano_job(
    mutator: PodMutator, request: review.AdmissionRequest
) -> MutationRecord:
    """The answer for one Job: its task templates converted on CREATE (an UPDATE cannot change
    them: Volcano refuses it), unchanged when Volcano Jobs are not converted."""
    job = request.object or {}
    metadata = job.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    declared = metadata.get("namespace")
    namespace = request.namespace or (declared if isinstance(declared, str) else "") or "default"
    decision, warnings = await _decide(mutator, request, job, namespace)
    audit = audit_annotations(request, decision)
    answer = review.encode(request.uid, decision, warnings=warnings, audit=audit)
    return mutation_record(
        request, decision, answer, namespace, str(metadata.get("generateName") or "")
    )


async def _decide(
    mutator: PodMutator, request: review.AdmissionRequest, job: JsonObject, namespace: str
) -> tuple[Decision, list[str]]:
    """The decision, and the template store's warnings."""
    if not mutator.volcano_schedulers or request.operation != "CREATE":
        return _UNCHANGED, []
    if not is_volcano_job(job):
        return _UNCHANGED, []
    excluded = excluded_namespace(namespace, mutator.excluded_namespaces)
    if excluded is not None:
        return excluded, []
    policy = mutator.policy_now()
    decision = job_decision(
        job,
        lambda template: mutator.cache.decide(template, policy, namespace),
        mutator.volcano_schedulers,
        policy.webhook.legacy_scheduler_name,
        mutator.scope,
    )
    if not isinstance(decision, Converted):
        return decision, []
    # The same cluster-side checks as a pod's (capacity dropped, DeviceClass warnings).
    return await mutator.cluster_side(request, namespace, decision)
