"""What one workload's legacy GPU request becomes under DRA, in plain words, and its outcome."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from hami_dra_webhook.admission.admitted import AdmissionRules
from hami_dra_webhook.core.legacy.request import resource_maps
from hami_dra_webhook.core.legacy.selectors import (
    NOUSE_TYPE,
    NOUSE_UUID,
    USE_TYPE,
    USE_UUID,
    split_list,
    unsupported_annotations,
)
from hami_dra_webhook.core.model.containers import containers
from hami_dra_webhook.core.model.quantity import QuantityError, parse_quantity
from hami_dra_webhook.core.model.types import Attention, ContainerRef, JsonObject
from hami_dra_webhook.core.outcome.decision import (
    INIT_CLAIMS_HELD,
    ContainerPlan,
    Refusal,
    Unchanged,
)
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.translate.lints import pod_notes, sm_limit_note
from hami_dra_webhook.core.translate.pod import translate_pod
from hami_dra_webhook.core.vendors.families import (
    NVIDIA,
    container_families,
    families,
    names_a_family,
    uses_legacy,
)
from hami_dra_webhook.core.vendors.unknown import unknown_keys
from hami_dra_webhook.migrate.sources import Workload

Outcome = Literal["converted", "attention", "refused"]


@dataclass
class ContainerReport:
    name: str
    legacy: dict[str, str]
    dra: str
    notes: list[str] = field(default_factory=list)


@dataclass
class WorkloadReport:
    namespace: str
    kind: str
    name: str
    outcome: Outcome
    reason: str = ""  # a refusal's tag (docs/translation.md)
    message: str = ""  # a refusal's words
    selectors: str = ""
    containers: list[ContainerReport] = field(default_factory=list)
    attention: list[str] = field(default_factory=list)
    source: str = ""  # file, file#N (its Nth document), or "cluster"
    # The pod template's place inside an object that is not a built-in workload ("" otherwise)
    embedded_at: str = ""
    notes: list[str] = field(default_factory=list)  # said, but no attention needed
    # The webhook converts or refuses its pods (False: it leaves them, another scheduler's or
    # out of scope): what `scan --exit-code` counts as legacy requests that remain.
    acted_on: bool = True

    def as_json(self) -> JsonObject:
        found = asdict(self)
        del found["acted_on"]
        return found


def worth_reporting(pod: Any, policy: Policy) -> bool:
    """A pod with a legacy resource, or a name that looks like one the configuration does not
    know (an old chip name: its pods stay Pending)."""
    return uses_legacy(pod, policy) or bool(pod_notes(pod, policy))


EMBEDDED_NOTE = (
    "a pod template inside {kind}: its pods are converted when they are created (the"
    " webhook does it at admission); convert leaves it as it is unless given --embedded"
)


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def assess(workload: Workload, rules: AdmissionRules) -> WorkloadReport:
    """The report for a workload whose pod (template) uses legacy resources: the decision the
    webhook, dry-run and convert give the same input (`rules`), in words."""
    kind, name, namespace, pod = workload.kind, workload.name, workload.namespace, workload.pod
    source, embedded_at, policy = workload.source, workload.embedded_at, rules.policy
    decision = rules.template(pod, namespace, translate_pod)
    metadata = pod.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    annotations = annotations if isinstance(annotations, dict) else {}
    plan: dict[ContainerRef, list[ContainerPlan]] = {}
    for planned in () if isinstance(decision, Unchanged) else decision.plan:
        plan.setdefault(planned.ref, []).append(planned)  # one per family it names
    report = WorkloadReport(
        namespace=namespace,
        kind=kind,
        name=name,
        outcome="converted",
        selectors=_selectors_in_words(annotations),
        containers=_containers(pod, policy, plan, decision),
        attention=unsupported_annotations(annotations),
        source=source,
        embedded_at=embedded_at,
    )
    if embedded_at and not (isinstance(decision, Unchanged) and decision.left_alone):
        report.notes.append(EMBEDDED_NOTE.format(kind=f"{_article(kind)} {kind}"))
    if not isinstance(decision, Refusal | Unchanged) and (limit := sm_limit_note(pod, policy)):
        report.notes.append(limit)
    for container in report.containers:
        report.attention += [f"{container.name}: {note}" for note in container.notes]
    report.attention += [
        w for w in decision.warnings if isinstance(w, Attention) and w not in report.attention
    ]
    report.attention += pod_notes(pod, policy)
    if isinstance(decision, Refusal):
        report.outcome = "refused"
        report.reason, report.message = decision.reason, decision.message
        if decision.reason == "no-memory-sizes":
            report.message += " (scan --cluster reads them from the driver's ResourceSlices)"
        return report
    if isinstance(decision, Unchanged) and decision.left_alone:
        report.attention.append(decision.left_alone)
        report.acted_on = False
    elif not isinstance(decision, Unchanged) and decision.init_claims_held:
        report.attention.append(INIT_CLAIMS_HELD)
    if report.attention:
        report.outcome = "attention"
    return report


def _containers(
    pod: JsonObject,
    policy: Policy,
    plan: dict[ContainerRef, list[ContainerPlan]],
    decision: object,
) -> list[ContainerReport]:
    reports = []
    for ref, container in containers(pod.get("spec")):
        unknown = unknown_keys(container, policy)
        if not unknown and not names_a_family(container, policy):
            continue
        limits, requests = resource_maps(container)
        keys = [
            k for keys in container_families(container, families(policy)).values() for k in keys
        ]
        keys += unknown
        legacy = {k: _as_written(limits.get(k, requests.get(k))) for k in keys}
        label = ref.shown if ref.list_name == "containers" else f"{ref.shown} (init)"
        parts = [_container(label, legacy, p, decision) for p in plan.get(ref, [])]
        if len(parts) == 1:
            reports.append(parts[0])
        elif parts:  # a container naming two families: one claim each
            reports.append(
                ContainerReport(
                    label,
                    legacy,
                    " + ".join(p.dra for p in parts),
                    [n for p in parts for n in p.notes],
                )
            )
        else:
            reports.append(_container(label, legacy, None, decision))
    return reports


# What kube-apiserver makes of a whole number that ends in zeros: 3000 -> 3k, 2000000 -> 2M.
_CANONICAL_THOUSANDS = re.compile(r"^[0-9]+[kMGTPE]$")


def _as_written(value: object) -> str:
    """A legacy value as its manifest wrote it: kube-apiserver stores `3000` as `3k` (its
    canonical quantity), which legacy HAMi reads as 3000; a whole number is shown as one."""
    text = str(value)
    if not _CANONICAL_THOUSANDS.match(text):
        return text  # as written: a binary suffix (16Gi) or a fraction stays what it was
    try:
        return str(int(parse_quantity(text)))
    except (QuantityError, ValueError):
        return text


def _container(
    label: str, legacy: dict[str, str], planned: ContainerPlan | None, decision: object
) -> ContainerReport:
    if planned is None:
        words = "left unchanged" if isinstance(decision, Unchanged) else "not converted"
        return ContainerReport(label, legacy, f"{words} (see the outcome)")
    notes = list(planned.notes)  # as the decision said them
    if planned.family == NVIDIA and planned.share is None:
        return ContainerReport(label, legacy, "no device (legacy keys removed)", notes)
    return ContainerReport(label, legacy, planned.summary, notes)


def _selectors_in_words(annotations: JsonObject) -> str:
    parts = []
    for key, words in (
        (USE_TYPE, "type contains"),
        (NOUSE_TYPE, "type not containing"),
        (USE_UUID, "UUID in"),
        (NOUSE_UUID, "UUID not in"),
    ):
        value = annotations.get(key)
        items = split_list(value) if isinstance(value, str) else []
        if items:
            parts.append(f"{words} {' or '.join(items)}")
    return "; ".join(parts)
