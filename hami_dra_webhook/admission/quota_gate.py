"""The GPU quota gate at admission (issues 47, 62): a GPU pod created in a namespace whose
ResourceQuota names a kept GPU key gets the scheduling gate `hami.io/gpu-quota` (and the label
`hami.io/gpu-quota=held`, the quota work's hint), which holds it until the quota work has
counted it (cluster/quota/work.py). Legacy and converted pods alike: one count keeps the
namespace within its quota whichever pool a pod lands in (docs/quotas.md). Whether a namespace
holds its pods is this replica's watched view's answer (cluster/quota/view.py), whichever replica
answers (until the view has listed the quotas: a read of the namespace's, held when it fails).
Stateless: nothing is reserved here, so a pod that is never created (a dry run, a later
webhook's refusal) holds nothing.

Two ways in, one rule (`gate_ops`):
- the pod webhook (POST /mutate) decides it for each pod it converts, in the same answer, and
    marks the pod (annotation `hami.io/gpu-quota-decided`) so that the next one is not called;
- POST /gate-gpu-quota decides it for every other GPU pod (opted out, outside the migration
    scope, with claims of its own, Volcano's task pods). A tenant who writes the mark on a pod
    of their own only skips this call: the chart's policy then refuses the pod where a quota
    needs the gate, and nothing is let through.

POST /gate-gpu-quota-claims: in those namespaces, a ResourceClaim that would grow what a
released pod holds is refused (cluster/quota/claims.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

from hami_dra_webhook.cluster.quota.claims import claim_refusal
from hami_dra_webhook.cluster.quota.view import QuotaView
from hami_dra_webhook.core.model import patch
from hami_dra_webhook.core.model.patch import PatchOp
from hami_dra_webhook.core.outcome.decision import Converted, Decision, Refusal, Unchanged
from hami_dra_webhook.core.quota.gpu_quota import GATE, HELD_LABEL, HELD_LABEL_VALUE
from hami_dra_webhook.core.review import wire
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.kube.port import KubeApi

HELD = (
    f"held by scheduling gate {GATE} until hami-dra-webhook has counted it against the"
    " namespace's GPU quota (kubectl describe pod shows why it waits, if it does)"
)
DECIDED = "hami.io/gpu-quota-decided"  # the pod webhook decided the gate: "held" or "free"


def gated(gates: Any) -> bool:
    return isinstance(gates, list) and any(
        isinstance(g, dict) and g.get("name") == GATE for g in gates
    )


def gate_ops(gates: Any, labels: Any) -> list[PatchOp]:
    """The gate added behind the pod's own `gates` (spec.schedulingGates as written), and the
    held label (`labels`: metadata.labels as written, or after the ops before these)."""
    ops: list[PatchOp] = []
    if not gated(gates):
        if isinstance(gates, list):
            ops.append(patch.add(patch.pointer("spec", "schedulingGates", "-"), {"name": GATE}))
        else:
            ops.append(patch.add(patch.pointer("spec", "schedulingGates"), [{"name": GATE}]))
    if not isinstance(labels, dict):
        ops.append(patch.add(patch.pointer("metadata", "labels"), {HELD_LABEL: HELD_LABEL_VALUE}))
    elif labels.get(HELD_LABEL) != HELD_LABEL_VALUE:
        ops.append(patch.add(patch.pointer("metadata", "labels", HELD_LABEL), HELD_LABEL_VALUE))
    return ops


async def holds(quotas: QuotaView | None, namespace: str) -> bool:
    """Whether a GPU pod created in `namespace` now is held (every one, without a view)."""
    return True if quotas is None else await quotas.holds(namespace)


async def with_quota_gate(
    decision: Decision, gates: Any, namespace: str, quotas: QuotaView | None
) -> Decision:
    """A pod CREATE's conversion with the gate decided (the pod webhook's way in): the gate and
    label when its namespace holds its pods, and the mark either way. The conversion's own ops
    leave `metadata.labels` and `metadata.annotations` in place (its label and annotation)."""
    if not isinstance(decision, Converted) or not decision.plan or quotas is None:
        return decision  # (a pod without GPUs, whose containers only got NVIDIA's env)
    held = await holds(quotas, namespace)
    ops = gate_ops(gates, {}) if held else []
    ops.append(
        patch.add(patch.pointer("metadata", "annotations", DECIDED), "held" if held else "free")
    )
    warnings = [*decision.warnings, HELD] if held else decision.warnings
    return dataclasses.replace(decision, patch=[*decision.patch, *ops], warnings=warnings)


async def gate_answer(
    request: wire.AdmissionRequest, quotas: QuotaView | None
) -> wire.ReviewAnswer:
    """The answer: the gate added to a GPU pod CREATE of a namespace that holds its pods;
    anything else unchanged."""
    pod = request.object
    spec = pod.get("spec") if isinstance(pod, dict) else None
    if request.operation != "CREATE" or not request.is_pod or not isinstance(spec, dict):
        return wire.encode(request.uid, Unchanged(warnings=[]))
    metadata = pod.get("metadata") if isinstance(pod, dict) else None
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    if not await holds(quotas, request.namespace or ""):
        return wire.encode(request.uid, Unchanged(warnings=[]))
    ops = gate_ops(spec.get("schedulingGates"), labels)
    if not ops:
        return wire.encode(request.uid, Unchanged(warnings=[]))
    gated_pod = Converted(patch=ops, templates=[], plan=(), warnings=[HELD], resources=[])
    return wire.encode(request.uid, gated_pod, audit={"gpu-quota": "held"})


# kube-scheduler makes the claims of a pod's extended resources from the pod's own resources
# (KEP-5004), which the pass charged before it released the pod.
SCHEDULER = "system:kube-scheduler"
CLAIM_CHECK_TIMEOUT = 5.0


async def claim_answer(
    request: wire.AdmissionRequest, api: KubeApi | None, policy: Policy
) -> wire.ReviewAnswer:
    """The answer to a ResourceClaim CREATE: refused when it would grow what a released pod
    holds; anything else allowed."""
    claim = request.object
    kind = request.kind
    if (
        api is None
        or request.operation != "CREATE"
        or (kind.group, kind.kind) != ("resource.k8s.io", "ResourceClaim")
        or request.sub_resource
        or not isinstance(claim, dict)
        or request.user == SCHEDULER
    ):
        return wire.encode(request.uid, Unchanged(warnings=[]))
    why = await claim_refusal(
        api, request.namespace or "", claim, policy, timeout=CLAIM_CHECK_TIMEOUT
    )
    if why is None:
        return wire.encode(request.uid, Unchanged(warnings=[]))
    refused = Refusal(403, why, [], reason="claim-under-a-released-pod")
    return wire.encode(request.uid, refused, audit={"gpu-quota": "claim-refused"})
