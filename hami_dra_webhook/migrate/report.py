"""What one workload's legacy GPU request becomes under DRA, in plain words, and its outcome."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from hami_dra_webhook.core.legacy import has_legacy_keys, read_request, resolve_share, resource_maps
from hami_dra_webhook.core.policy import Policy
from hami_dra_webhook.core.selectors import (
    GPU_SCHEDULER_POLICY,
    NODE_SCHEDULER_POLICY,
    NOUSE_TYPE,
    NOUSE_UUID,
    NUMA_BIND,
    USE_TYPE,
    USE_UUID,
    VGPU_MODE,
    split_list,
)
from hami_dra_webhook.core.translate import INIT_CLAIMS_HELD, translate_pod
from hami_dra_webhook.core.types import ContainerRef, JsonObject, Refused

Outcome = Literal["converts", "attention", "refused"]


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
    reason: str = ""
    selectors: str = ""
    containers: list[ContainerReport] = field(default_factory=list)
    attention: list[str] = field(default_factory=list)

    def as_json(self) -> JsonObject:
        return asdict(self)


def uses_legacy(pod: Any, policy: Policy) -> bool:
    spec = pod.get("spec") if isinstance(pod, dict) else None
    if not isinstance(spec, dict):
        return False
    names = policy.legacy_resource_names
    for list_name in ("initContainers", "containers"):
        items = spec.get(list_name)
        if isinstance(items, list) and any(has_legacy_keys(c, names) for c in items):
            return True
    return False


def assess(kind: str, name: str, namespace: str, pod: JsonObject, policy: Policy) -> WorkloadReport:
    """The report for a workload whose pod (template) uses legacy resources."""
    translation = translate_pod(pod, policy, namespace)
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    report = WorkloadReport(
        namespace=namespace,
        kind=kind,
        name=name,
        outcome="converts",
        selectors=_selectors_in_words(annotations),
        containers=_containers(pod, policy),
        attention=_annotation_attention(annotations),
    )
    for container in report.containers:
        report.attention += [f"{container.name}: {note}" for note in container.notes]
    if translation.outcome == "refused":
        # The same verdict as dry-run, convert and the webhook give the same input.
        report.outcome = "refused"
        report.reason = translation.message or "refused"
        if translation.reason == "no-memory-sizes":
            report.reason += " (scan --cluster reads them from the driver's ResourceSlices)"
        return report
    left_alone = [w for w in translation.warnings if w.startswith("left unchanged")]
    if left_alone:
        report.attention += left_alone
    if INIT_CLAIMS_HELD in translation.warnings:
        report.attention.append(
            "init and app containers hold separate GPU claims at once under DRA (legacy HAMi"
            " counted only the peak): the pod may no longer fit where it did"
        )
    if report.attention:
        report.outcome = "attention"
    return report


def _containers(pod: JsonObject, policy: Policy) -> list[ContainerReport]:
    spec = pod.get("spec") or {}
    names = policy.legacy_resource_names
    reports = []
    for list_name in ("initContainers", "containers"):
        items = spec.get(list_name)
        for index, container in enumerate(items if isinstance(items, list) else []):
            if not has_legacy_keys(container, names):
                continue
            ref = ContainerRef(list_name, index, str(container.get("name")))
            limits, requests = resource_maps(container)
            legacy = {
                k: str(limits.get(k, requests.get(k)))
                for k in names
                if k in limits or k in requests
            }
            reports.append(_container(ref, container, legacy, policy))
    return reports


def _container(
    ref: ContainerRef, container: JsonObject, legacy: dict[str, str], policy: Policy
) -> ContainerReport:
    label = ref.name if ref.list_name == "containers" else f"{ref.name} (init)"
    notes: list[str] = []
    try:
        request = read_request(container, ref, policy)
        share = resolve_share(request, ref, policy, [])
    except Refused:
        return ContainerReport(label, legacy, "not converted (see the outcome)")
    if request.priority is not None:
        notes.append("priority has a runtime effect only through legacy HAMi's node monitor")
    if share is None:
        return ContainerReport(label, legacy, "no GPU (legacy keys removed)", notes)
    if share.cores == 100 and (share.memory_mib or share.percentage):
        notes.append("cores 100 with part of the memory: DRA cannot keep the card exclusive")
    return ContainerReport(
        label, legacy, in_words(share.count, share.memory_mib, share.percentage, share.cores), notes
    )


def in_words(count: int, memory_mib: int | None, percentage: int | None, cores: int) -> str:
    gpus = "1 GPU" if count == 1 else f"{count} different GPUs"
    if percentage is not None:
        memory = f"{percentage}% of each card's memory"
    elif memory_mib is not None:
        memory = f"{memory_mib} MiB"
    else:
        memory = "the whole memory"
    compute = (
        "all SMs (exclusive)"
        if cores == 100
        else ("no SM limit" if cores == 0 else f"{cores}% of SMs")
    )
    return f"{gpus}, {memory}, {compute}"


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


def _annotation_attention(annotations: JsonObject) -> list[str]:
    found = []
    mode = annotations.get(VGPU_MODE)
    if isinstance(mode, str):
        found.append(f"{VGPU_MODE}={mode}: DRA offers only hami-core devices")
    policy = annotations.get(GPU_SCHEDULER_POLICY)
    if isinstance(policy, str):
        if "mutex" in split_list(policy):
            found.append(f"{GPU_SCHEDULER_POLICY}=mutex (idle cards only) has no DRA equivalent")
        else:
            found.append(f"{GPU_SCHEDULER_POLICY}={policy} (card placement) has no DRA equivalent")
    for key in (NUMA_BIND, NODE_SCHEDULER_POLICY):
        if key in annotations:
            found.append(f"{key}={annotations[key]} has no DRA equivalent")
    return found
