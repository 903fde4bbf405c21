"""What admission does to a pod, or to the pods of a pod template: the one rule that the webhook
(its pods, Volcano Jobs, the workload preview) and every tool (`dry-run`, `convert`, `scan`)
apply. They word and render its judgements; none walks a workload, or decides what is left
alone, in a way of its own.

`AdmissionRules` holds what decides it: the policy (with the cluster's facts, where the caller
has them), the namespaces that are never converted, the migration scope (the pod webhook's
selectors, read on a template whose pods it has not seen yet) with the opt-out label, and the
Volcano schedulers whose Jobs are converted at their own admission (any other scheduler's pods
are left alone). A pod gets a `Decision`; a workload gets one `Judgement` per pod template.

What the cluster adds to a conversion (capacity dropped, DeviceClass warnings, the templates
stored) is `PodMutator.cluster_side`, which pods and Volcano Jobs both go through.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from hami_dra_webhook.core.migration.pools import SCOPE_LABEL, SCOPE_VALUE, Scope, template_labels
from hami_dra_webhook.core.model.types import Attention, JsonObject
from hami_dra_webhook.core.outcome.decision import (
    Decision,
    Refusal,
    Unchanged,
    excluded_namespace,
)
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.translate.lints import pod_notes
from hami_dra_webhook.core.translate.pod import translate_pod
from hami_dra_webhook.core.translate.pod_view import OPT_OUT_LABEL
from hami_dra_webhook.core.vendors.families import uses_legacy
from hami_dra_webhook.core.workloads.volcano_jobs import is_volcano_job, job_decision
from hami_dra_webhook.files.embedded import EmbeddedPod, embedded_pods
from hami_dra_webhook.files.manifests import pod_template

# A pod template's decision: (the pod as admitted, the policy, its namespace or None).
Decide = Callable[[JsonObject, Policy, "str | None"], Decision]
# A namespace name is a DNS label (RFC 1123), as kube-apiserver validates it.
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_UNCHANGED = Unchanged(warnings=[])


def out_of_scope(scope: Scope) -> str:
    """Why the pods of a template the migration scope does not select are left."""
    return (
        f"left unchanged: migration scope {scope.mode} converts only pods labelled"
        f" {SCOPE_LABEL}={SCOPE_VALUE}; legacy HAMi keeps these"
    )


@dataclass(frozen=True, slots=True)
class Judgement:
    """What admission does to the pods of one pod template. `where`: its place inside an object
    that is not a built-in workload ("" for a built-in workload's template); `pod`: the
    template as written; `admitted`: as its controller creates the pods (a Volcano Job's take
    its scheduler); `legacy`: it names a legacy resource; `notes`: names that look like HAMi's
    but are not known, and the like."""

    where: str
    path: tuple[str | int, ...]
    pod: JsonObject
    admitted: JsonObject
    decision: Decision
    legacy: bool
    notes: list[Attention]
    # The pod webhook is sent its pods: not in an excluded namespace, selected by the migration
    # scope, not opted out (the workload preview says nothing of the others).
    selected: bool = True
    inside: EmbeddedPod | None = None

    @property
    def left_alone(self) -> str | None:
        """Why the pods are left as they are, though they name legacy resources."""
        decision = self.decision
        return decision.left_alone if isinstance(decision, Unchanged) else None

    @property
    def rewritable(self) -> bool:
        """Whether a tool can rewrite this template in place (a built-in workload's, or a real
        template inside a custom resource; not an operator's container-shaped map)."""
        return self.inside is None or not (self.inside.bare or self.inside.left)

    @property
    def worth_saying(self) -> bool:
        """It names a legacy resource, or a name that looks like one."""
        return self.legacy or bool(self.notes)


@dataclass(frozen=True, slots=True)
class Judgements:
    """The judgements of one object's pod templates (at most the `limit` asked for) and how
    many templates it holds."""

    items: list[Judgement] = field(default_factory=list)
    found: int = 0


@dataclass(frozen=True, slots=True)
class AdmissionRules:
    """Everything that decides what admission does to a pod (see the module's docstring)."""

    policy: Policy
    excluded_namespaces: frozenset[str] = frozenset({"kube-system"})
    scope: Scope = field(default_factory=Scope)
    # Volcano's schedulers when Volcano Jobs are converted at their admission (empty: not).
    volcano_schedulers: frozenset[str] = frozenset()

    def with_policy(self, policy: Policy) -> AdmissionRules:
        return self if policy is self.policy else replace(self, policy=policy)

    def pod(self, namespace: str, decide: Callable[[Policy], Decision]) -> Decision:
        """A pod's decision at its creation in `namespace` (the pod webhook's selectors have
        applied the migration scope; `decide` translates the pod under a policy)."""
        if not _NAMESPACE.fullmatch(namespace):
            # It names the API path templates are written to: never used unless it is a name.
            return Refusal(
                code=400,
                message=f"the namespace {namespace[:80]!r} is not a Kubernetes namespace name"
                " (lower-case letters, digits and '-', at most 63)",
                warnings=[],
                reason="bad-namespace",
            )
        return excluded_namespace(namespace, self.excluded_namespaces) or decide(self.policy)

    def templates(
        self,
        document: Any,
        namespace: str | None,
        decide: Decide = translate_pod,
        limit: int | None = None,
    ) -> Judgements:
        """Each pod template of `document` judged as its pods will be at admission: a built-in
        workload's template, else every one inside (at most `limit` judged)."""
        found = pod_template(document)
        if found is not None:
            path, pod = found
            return Judgements([self._judge("", path, pod, pod, None, namespace, decide)], 1)
        inside = embedded_pods(document, self.volcano_schedulers)
        judged = [
            self._judge(e.where, e.path, e.pod, e.admitted, e, namespace, decide)
            for e in inside[:limit]
        ]
        return Judgements(judged, len(inside))

    def template(self, pod: JsonObject, namespace: str | None, decide: Decide) -> Decision:
        """The decision for the pods of one template, as admitted: left in an excluded
        namespace or outside the migration scope, else decided."""
        if uses_legacy(pod, self.policy):
            left = excluded_namespace(namespace, self.excluded_namespaces)
            if left is not None:
                return left
            labels = template_labels(pod)
            if labels.get(OPT_OUT_LABEL) != "ignore" and not self.scope.selects_pod(labels):
                note = out_of_scope(self.scope)
                return Unchanged(warnings=[note], left_alone=note)
        return decide(pod, self.policy, namespace)

    def volcano_job(self, job: JsonObject, namespace: str, decide: Decide) -> Decision:
        """A Volcano Job's decision at its creation: its task templates converted when Volcano
        Jobs are, each judged by `template` (a task refused refuses the Job)."""
        if not self.volcano_schedulers or not is_volcano_job(job):
            return _UNCHANGED
        left = excluded_namespace(namespace, self.excluded_namespaces)
        if left is not None:
            return left
        return job_decision(
            job,
            lambda template: self.template(template, namespace, decide),
            self.volcano_schedulers,
            self.policy.webhook.legacy_scheduler_name,
        )

    def _judge(
        self,
        where: str,
        path: tuple[str | int, ...],
        pod: JsonObject,
        admitted: JsonObject,
        inside: EmbeddedPod | None,
        namespace: str | None,
        decide: Decide,
    ) -> Judgement:
        decision = self.template(admitted, namespace, decide)
        legacy = uses_legacy(pod, self.policy)
        notes = pod_notes(pod, self.policy)
        selected = self.selects(admitted, namespace)
        return Judgement(where, path, pod, admitted, decision, legacy, notes, selected, inside)

    def selects(self, pod: JsonObject, namespace: str | None) -> bool:
        """Whether the pod webhook is sent these pods (its namespaceSelector, as far as the
        excluded namespaces go, and its objectSelector)."""
        if namespace is not None and namespace in self.excluded_namespaces:
            return False
        return self.scope.selects_pod(template_labels(pod))
