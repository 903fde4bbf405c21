"""The admission use case: one AdmissionReview request in, its answer out.

The core decides; this layer adds what needs the cluster (its memory sizes, whether capacity
survives, the templates created before the answer) and may turn the decision into a refusal.
Every answer is encoded once, by `wire.encode`.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from hami_dra_webhook.admission.admitted import AdmissionRules
from hami_dra_webhook.admission.quota_gate import with_quota_gate
from hami_dra_webhook.cluster.quota.view import QuotaView
from hami_dra_webhook.cluster.state import ClusterState
from hami_dra_webhook.cluster.templates.store import TemplateStore, TemplateUnavailable
from hami_dra_webhook.core.outcome.decision import (
    Converted,
    Decision,
    Refusal,
    Unchanged,
)
from hami_dra_webhook.core.review import wire
from hami_dra_webhook.core.review.fast import FastPod
from hami_dra_webhook.core.review.read_pod import DictPod, ReadPod
from hami_dra_webhook.core.review.translation_cache import TranslationCache
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.translate.ephemeral import privileged_ephemeral
from hami_dra_webhook.core.translate.pod import translate_pod
from hami_dra_webhook.core.translate.pod_checks import MAX_CONTAINERS_PER_POD, too_many_containers
from hami_dra_webhook.core.translate.reapply import strip_reapplied
from hami_dra_webhook.core.vendors.facts import ClusterFacts, with_cluster_facts

T = TypeVar("T")

CAPACITY_HELP = (
    "kube-apiserver drops DRA consumable capacity here, so this shared GPU request would get"
    " whole GPUs; enable the DRAConsumableCapacity feature gate (default on from 1.36)"
)
REAPPLIED = "legacy GPU resources re-applied to a converted pod were dropped"
INTERNAL_ERROR = "internal error in hami-dra-webhook; see its log"
MAX_AUDIT_MESSAGE = 1024  # characters of a refusal's message in its audit annotation
_UNCHANGED = Unchanged(warnings=[])


@dataclass
class MutationRecord:
    """The encoded answer plus what the shell logs and counts, built once from the final
    decision (templates only when the pod is admitted with them)."""

    answer: wire.ReviewAnswer
    operation: str
    outcome: str  # converted | unchanged | refused | error
    namespace: str = ""
    name: str = ""
    uid: str = ""
    user: str = ""
    resource: str = ""
    dry_run: bool = False
    templates: list[str] = field(default_factory=list)
    resources: list[str] = field(default_factory=list)
    reason: str = ""  # a refusal's stable tag
    message: str = ""  # a refusal's message, as the pod's creator gets it


def internal_error(request: wire.Request) -> MutationRecord:
    """The answer when the use case itself failed (the shell logs the traceback)."""
    refusal = Refusal(code=500, message=INTERNAL_ERROR, warnings=[], reason="internal-error")
    return MutationRecord(
        answer=wire.encode(request.uid, refusal),
        operation=request.operation,
        outcome="error",
        namespace=request.namespace or "",
        uid=request.uid,
        user=request.user,
        resource=request.resource_name,
        dry_run=request.dry_run,
        reason="internal-error",
        message=INTERNAL_ERROR,
    )


@dataclass
class PodMutator:
    """The webhook's admissions of pods and Volcano Jobs: `rules` decides (admission/
    admitted.py), with the cluster's facts in its policy; what the cluster adds to a conversion
    (`cluster_side`) applies to both alike."""

    rules: AdmissionRules
    store: TemplateStore
    cluster: ClusterState | None = None
    budget: float = 5.0
    cache: TranslationCache = field(default_factory=TranslationCache)
    # Where the work on a large review runs (mutate(..., off_loop=True)): a thread, so that the
    # event loop gets the interpreter back every switch interval (5 ms) while a pod of tens of
    # thousands of containers is read; None: on the loop.
    off_loop: Executor | None = None
    # GPU quotas (issue 62): whether a pod CREATE of a namespace is held, from this replica's
    # watched ResourceQuotas; None when the webhook keeps no GPU quota (or has no cluster).
    quotas: QuotaView | None = None
    _variants: dict[tuple[ClusterFacts, bool], AdmissionRules] = field(
        default_factory=dict, repr=False
    )

    @property
    def policy(self) -> Policy:
        """The configured policy (without the cluster's facts)."""
        return self.rules.policy

    def needs_off_loop(self, request: wire.Request, fast: FastPod | None = None) -> bool:
        """Whether the pod (or the old one) has enough containers that translating it takes
        milliseconds: work for the `off_loop` thread, when there is one."""
        if self.off_loop is None:
            return False
        if fast is not None:
            return fast.container_count > 256
        for pod in (request.object, request.old_object):
            spec = pod.get("spec") if isinstance(pod, dict) else None
            if isinstance(spec, dict):
                lists = (spec.get(name) for name in ("containers", "initContainers"))
                if sum(len(items) for items in lists if isinstance(items, list)) > 256:
                    return True
        return False

    async def mutate(
        self,
        request: wire.Request,
        *,
        off_loop: bool = False,
        fast: FastPod | None = None,
    ) -> MutationRecord:
        """The answer to `request`; `off_loop`: a large one, whose pod-sized work runs on the
        `off_loop` executor; `fast`: the pod of a CREATE read by `review_fast` (the request's
        `object` is then None)."""
        pod: ReadPod = fast or DictPod(request.object or {})
        declared, generate_name = pod.namespace, pod.generate_name
        namespace = (
            request.namespace or (declared if isinstance(declared, str) else "") or "default"
        )
        off = self.off_loop if off_loop else None
        decision, warnings = await self._decide(request, pod, namespace, off)
        encode = functools.partial(
            wire.encode, warnings=warnings, audit=audit_annotations(request, decision)
        )
        answer = await _run(off, encode, request.uid, decision)
        return mutation_record(request, decision, answer, namespace, str(generate_name or ""))

    async def _decide(
        self,
        request: wire.Request,
        pod: ReadPod,
        namespace: str,
        off: Executor | None,
    ) -> tuple[Decision, list[str]]:
        """The final decision for this request and the cluster's warnings (the pod-sized work
        on `off` when it is given)."""
        new, old = request.object or {}, request.old_object  # decoded: not a fast-read CREATE
        if request.adds_ephemeral_containers:
            refused = await _run(off, privileged_ephemeral, new, old, self.policy)
            return (refused or _UNCHANGED), []
        if not request.is_pod or request.operation not in ("CREATE", "UPDATE"):
            return _UNCHANGED, []
        if request.operation == "UPDATE":
            ops = await _run(off, strip_reapplied, new, old, self.policy)
            if not ops:
                return _UNCHANGED, []
            reapplied = Converted(
                patch=ops, templates=[], plan=(), warnings=[REAPPLIED], resources=[]
            )
            return reapplied, []
        rules = self.rules_now()
        if off is None:
            decision = rules.pod(
                namespace, lambda policy: self.cache.decide_read(pod, policy, namespace)
            )
        else:  # not kept: the cache is the loop's, and pods this large do not repeat
            decision = await _run(off, rules.pod, namespace, _translator(pod, namespace))
        decided, warnings = await self.cluster_side(request, namespace, decision)
        gates = pod.scheduling_gates()
        return await with_quota_gate(decided, gates, namespace, self.quotas), warnings

    async def mutate_job(self, request: wire.Request) -> MutationRecord:
        """The answer for one Volcano Job (core/workloads/volcano_jobs.py says why the Job and not
        its pods): its task templates converted on CREATE (an UPDATE cannot change them: Volcano
        refuses it), unchanged when Volcano Jobs are not converted."""
        job = request.object or {}
        metadata = job.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        declared = metadata.get("namespace")
        namespace = (
            request.namespace or (declared if isinstance(declared, str) else "") or "default"
        )
        decision: Decision = _UNCHANGED
        warnings: list[str] = []
        if request.operation == "CREATE":
            judged = self.rules_now().volcano_job(job, namespace, self.cache.decide)
            decision, warnings = await self.cluster_side(request, namespace, judged)
        audit = audit_annotations(request, decision)
        answer = wire.encode(request.uid, decision, warnings=warnings, audit=audit)
        return mutation_record(
            request, decision, answer, namespace, str(metadata.get("generateName") or "")
        )

    async def cluster_side(
        self, request: wire.Request, namespace: str, decision: Decision
    ) -> tuple[Decision, list[str]]:
        """What the cluster adds to a conversion (a pod's or a Volcano Job's): warnings, or a
        refusal when capacity is dropped or a template cannot be confirmed; any other decision
        as it is."""
        if not isinstance(decision, Converted):
            return decision, []
        warnings = self._cluster_warnings(decision.resources)
        if self._capacity_dropped() and decision.shares_a_gpu:
            if not self.policy.webhook.allow_sharing_without_capacity:
                refusal = Refusal(
                    code=422,
                    message=CAPACITY_HELP,
                    warnings=decision.warnings,
                    reason="capacity-dropped",
                    plan=decision.plan,
                )
                return refusal, warnings
            warnings.append("consumable capacity is off: this pod may get whole GPUs")
        stored, store_warnings = await self.ensure_templates(request, namespace, decision)
        return stored, warnings + store_warnings

    async def ensure_templates(
        self, request: wire.Request, namespace: str, decision: Converted
    ) -> tuple[Decision, list[str]]:
        """The conversion once its templates exist (with the store's warnings), or the refusal
        when they cannot be confirmed within the admission budget."""
        deadline = time.monotonic() + self.budget
        try:
            warnings = await self.store.ensure(
                namespace, decision.templates, dry_run=request.dry_run, deadline=deadline
            )
        except TemplateUnavailable as error:
            refusal = Refusal(
                code=error.code,
                message=error.message,
                warnings=decision.warnings,
                reason="template-unavailable",
                plan=decision.plan,
            )
            return refusal, []
        return decision, warnings

    def rules_now(self) -> AdmissionRules:
        """The rules, with what the cluster says when one is reachable in their policy: the GPU
        memory sizes and Hygon compute units its ResourceSlices publish (each family's facts:
        core/vendors/facts.py; configured values are the fallback), and no capacity requests
        where kube-apiserver drops them (so templates are stored as written)."""
        facts = self.cluster.facts if self.cluster is not None else ()
        capacity = self.policy.webhook.consumable_capacity and not self._capacity_dropped()
        key = (facts, capacity)
        cached = self._variants.get(key)
        if cached is None:
            policy = with_cluster_facts(self.policy, facts, capacity)
            cached = self.rules.with_policy(policy)
            self._variants = {key: cached}  # only the current one is kept
        return cached

    def policy_now(self) -> Policy:
        """The policy with the cluster's facts (`rules_now`)."""
        return self.rules_now().policy

    def _capacity_dropped(self) -> bool:
        return self.cluster is not None and self.cluster.capacity == "dropped"

    def _cluster_warnings(self, resources: list[str]) -> list[str]:
        if self.cluster is None:
            return []
        return [
            f"DeviceClass {self.cluster.extended_resources[r]} also claims {r}"
            " (extendedResourceName); legacy requests may get whole GPUs from it"
            for r in resources
            if r in self.cluster.extended_resources
        ]


def _translator(pod: ReadPod, namespace: str) -> Callable[[Policy], Decision]:
    """`translate_pod` of the pod's view (decoded on the executor, with the rest); one of more
    containers than are converted decided from their resources alone, as translate_pod decides
    it."""

    def translate(policy: Policy) -> Decision:
        if pod.container_count > MAX_CONTAINERS_PER_POD:
            return too_many_containers(pod.container_count, pod.container_resources(), policy)
        return translate_pod(pod.view(), policy, namespace)

    return translate


async def _run(executor: Executor | None, work: Callable[..., T], *args: Any) -> T:
    if executor is None:
        return work(*args)
    return await asyncio.get_running_loop().run_in_executor(executor, work, *args)


def mutation_record(
    request: wire.Request,
    decision: Decision,
    answer: wire.ReviewAnswer,
    namespace: str,
    generate_name: str = "",
) -> MutationRecord:
    """What the shell records and logs of one answered admission (a pod's or a Job's)."""
    converted = decision if isinstance(decision, Converted) else None
    return MutationRecord(
        answer=answer,
        operation=request.operation,
        outcome=decision.outcome,
        namespace=namespace,
        name=request.name or generate_name,
        uid=request.uid,
        user=request.user,
        resource=request.resource_name,
        dry_run=request.dry_run,
        templates=_names(decision),
        resources=converted.resources if converted else [],
        reason=decision.reason if isinstance(decision, Refusal) else "",
        message=decision.message if isinstance(decision, Refusal) else "",
    )


def _names(decision: Decision) -> list[str]:
    if not isinstance(decision, Converted):
        return []
    return [t["metadata"]["name"] for t in decision.templates]


def audit_annotations(request: wire.Request, decision: Decision) -> dict[str, str] | None:
    """The audit annotations of an answer, from the final decision: every refusal with its
    reason tag, and an object created converted with its templates."""
    templates = _names(decision)
    if isinstance(decision, Refusal):
        audit = {"outcome": "refused", "message": decision.message[:MAX_AUDIT_MESSAGE]}
        return audit | {"reason": decision.reason}
    if isinstance(decision, Converted) and request.operation == "CREATE":
        return {"outcome": "converted", "templates": ",".join(templates) or "none"}
    return None
