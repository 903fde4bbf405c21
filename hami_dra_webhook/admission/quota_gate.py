"""POST /gate-gpu-quota: a GPU pod created in a namespace whose quotas name a GPU memory or
cores key (the chart's webhook entry selects those namespaces by the label the quota pass
writes) gets the scheduling gate `hami.io/gpu-quota`, which holds it until the quota pass has
counted it (cluster/quota_gate.py). Legacy and converted pods alike: one count keeps the
namespace within its quota whichever pool a pod lands in (docs/quotas.md). Stateless: nothing
is reserved here, so a pod that is never created (a dry run, a later webhook's refusal) holds
nothing.

POST /gate-gpu-quota-claims: in those namespaces, a ResourceClaim that would grow what a
released pod holds is refused (cluster/quota_claims.py)."""

from __future__ import annotations

from typing import Any

from hami_dra_webhook.cluster.quota_claims import claim_refusal
from hami_dra_webhook.core.model import patch
from hami_dra_webhook.core.outcome.decision import Converted, Refusal, Unchanged
from hami_dra_webhook.core.quota.gpu_quota import GATE, HELD_LABEL, HELD_LABEL_VALUE
from hami_dra_webhook.core.review import wire
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.kube.port import KubeApi

HELD = (
    f"held by scheduling gate {GATE} until hami-dra-webhook has counted it against the"
    " namespace's GPU quota (kubectl describe pod shows why it waits, if it does)"
)


def gate_answer(request: wire.AdmissionRequest) -> wire.ReviewAnswer:
    """The answer: the gate added to a pod CREATE that lacks it; anything else unchanged."""
    pod = request.object
    spec = pod.get("spec") if isinstance(pod, dict) else None
    if request.operation != "CREATE" or not request.is_pod or not isinstance(spec, dict):
        return wire.encode(request.uid, Unchanged(warnings=[]))
    gates: Any = spec.get("schedulingGates")
    if isinstance(gates, list) and any(
        isinstance(g, dict) and g.get("name") == GATE for g in gates
    ):
        return wire.encode(request.uid, Unchanged(warnings=[]))
    if isinstance(gates, list):
        op = patch.add(patch.pointer("spec", "schedulingGates", "-"), {"name": GATE})
    else:
        op = patch.add(patch.pointer("spec", "schedulingGates"), [{"name": GATE}])
    metadata = pod.get("metadata") if isinstance(pod, dict) else None
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    if isinstance(labels, dict):
        label = patch.add(patch.pointer("metadata", "labels", HELD_LABEL), HELD_LABEL_VALUE)
    else:
        label = patch.add(patch.pointer("metadata", "labels"), {HELD_LABEL: HELD_LABEL_VALUE})
    gated = Converted(patch=[op, label], templates=[], plan=(), warnings=[HELD], resources=[])
    return wire.encode(request.uid, gated, audit={"gpu-quota": "held"})


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
