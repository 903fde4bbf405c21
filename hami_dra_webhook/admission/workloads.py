"""The workloads' validating webhook: `kubectl apply` of a Deployment, a Job, a RayCluster...
answered with what its pods will become, since the pod webhook's own answer goes to the
controller that creates them, and a refusal then shows only as a FailedCreate event.

It never denies and never changes anything: each pod template is judged as the pod webhook will
judge its pods (the same core decision, the same policy with the cluster's facts), and every
line goes back as a warning, which kubectl prints. Bounded: at most MAX_TEMPLATES templates of
one object are judged, and no more warnings are sent than kube-apiserver passes on
(MAX_WARNINGS_TOTAL). A large body is judged off the event loop, without the translation cache
(the loop's), as the pod webhook judges a large pod.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any, Literal

from hami_dra_webhook.admission.mutator import PodMutator
from hami_dra_webhook.core.model.types import MAX_WARNING_LENGTH, JsonObject
from hami_dra_webhook.core.outcome.decision import Converted, Refusal, Unchanged
from hami_dra_webhook.core.review import wire
from hami_dra_webhook.core.translate.pod import translate_pod

MAX_TEMPLATES = 32
# kube-apiserver keeps a warning's first MAX_WARNING_LENGTH characters and ignores warnings past
# 4,096 characters in all: longer lines are split at spaces, and the answer stays within.
MAX_WARNINGS_TOTAL = 4000
CONTINUED = "  "  # the start of each further piece of a split line
PreviewOutcome = Literal["refused", "converted", "unchanged", "none"]
# Where a refusal of the pods of each kind shows: the FailedCreate event of their creator.
REFUSAL_SHOWS = {
    "Deployment": "a FailedCreate event of its ReplicaSet",
    "CronJob": "a FailedCreate event of each Job it starts",
}


@dataclass(frozen=True)
class Preview:
    """The answer and what to count: the worst outcome among the templates."""

    answer: wire.ReviewAnswer
    outcome: PreviewOutcome


@dataclass
class WorkloadPreview:
    """Each pod template of a workload judged by the pod webhook's rules (`AdmissionRules`,
    with the cluster's facts), worded as warnings."""

    mutator: PodMutator

    def answer(self, request: wire.AdmissionRequest, cached: bool = True) -> Preview:
        """The answer; `cached`: decide through the translation cache (on the event loop only)."""
        lines: list[str] = []
        outcome: PreviewOutcome = "none"
        document = request.object
        if request.operation in ("CREATE", "UPDATE") and isinstance(document, dict):
            outcome = self._judge(request, document, lines, cached)
        return Preview(allowed(request.uid, warnings(lines)), outcome)

    def _judge(
        self,
        request: wire.AdmissionRequest,
        document: JsonObject,
        lines: list[str],
        cached: bool,
    ) -> PreviewOutcome:
        metadata = document.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        namespace = request.namespace or str(metadata.get("namespace") or "") or "default"
        kind, name = str(document.get("kind", "")), str(request.name or metadata.get("name") or "")
        decide = self.mutator.cache.decide if cached else translate_pod
        judged = self.mutator.rules_now().templates(document, namespace, decide, MAX_TEMPLATES)
        worst: PreviewOutcome = "none"
        for judgement in judged.items:
            if not judgement.selected:
                continue  # the pod webhook never sees its pods: legacy HAMi keeps them
            where = judgement.where
            title = f"pods of {kind} {name}{f' {where}' if where else ''}"
            decision = judgement.decision
            if isinstance(decision, Refusal):
                shows = REFUSAL_SHOWS.get(kind, f"a FailedCreate event of this {kind}")
                lines.append(f"{title} will be refused at admission ({shows}): {decision.message}")
                worst = "refused"
            elif isinstance(decision, Converted):
                said = set(decision.summaries)
                lines += [f"{title}: {line}" for line in decision.summaries]
                lines += [f"{title}: {w}" for w in decision.warnings if w not in said]
                lines += [f"{title}: {w}" for w in judgement.notes]
                worst = worst if worst == "refused" else "converted"
            elif isinstance(decision, Unchanged) and decision.left_alone:
                lines.append(f"{title} are left as they are: {decision.left_alone}")
                worst = "unchanged" if worst == "none" else worst
        if judged.found > MAX_TEMPLATES:
            lines.append(
                f"{kind} {name} has {judged.found} pod templates; the first {MAX_TEMPLATES}"
                " were judged: `hami-dra-webhook dry-run` judges them all"
            )
        return worst


def allowed(uid: str, said: list[str] | None = None) -> wire.ReviewAnswer:
    """The preview's only answer: allowed, with what it has to say."""
    response: Any = {"uid": uid, "allowed": True} | ({"warnings": said} if said else {})
    return {"apiVersion": wire.API_VERSION, "kind": wire.KIND, "response": response}


def warnings(lines: list[str]) -> list[str]:
    """`lines` as admission warnings: each split at spaces into pieces kube-apiserver keeps
    whole, and no more than it passes on; what is left out is counted in a last one."""
    pieces: list[str] = []
    total = 0
    for index, line in enumerate(lines):
        split = _split(line)
        size = sum(len(piece) for piece in split)
        if total + size > MAX_WARNINGS_TOTAL - MAX_WARNING_LENGTH:
            pieces.append(f"... {len(lines) - index} more: `hami-dra-webhook dry-run` says all")
            break
        pieces += split
        total += size
    return pieces


def _split(line: str) -> list[str]:
    return textwrap.wrap(
        line,
        width=MAX_WARNING_LENGTH,
        subsequent_indent=CONTINUED,
        break_on_hyphens=False,  # template names and paths stay whole where they can
    ) or [line]
