"""How fast a wave's evicted GPU pods can come back, and when the next wave may start. No I/O.

A converted pod that a wave evicts comes back through kube-controller-manager: its ReplicaSet
(or Job, StatefulSet) writes the new pod, the resourceclaim controller writes the claim from the
pod's template (and the pod's claim status), all through one client limited to
`--kube-api-qps` (default 20) and `--kube-api-burst` (30). Measured on the real control plane
(benchmarks/claims.py, 1,000 pods of one ReplicaSet, v1.37): at 20/30 the pods were written in
50 s and the claims in 98 s, about two limited writes a pod; at 200/300 in 6 s and 9 s, and
kube-scheduler's allocation (about 12 pods/s on that 2-core machine) became the limit. So a
plan warns when a wave's pods would keep kube-controller-manager busy PACING_WARN_SECONDS or
more at the defaults, and a fleet move waits, between waves, until no pod is left waiting for
a claim from its template (`awaiting_claims`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from hami_dra_webhook.core.migration.pool_plan import ENDED, Step
from hami_dra_webhook.core.model.types import JsonObject

KCM_DEFAULT_QPS = 20.0
WRITES_PER_CONVERTED_POD = 2  # calibrated: 1,000 claims in 98 s at 20/s
PACING_WARN_SECONDS = 30.0


def comes_back_converted(step: Step) -> bool:
    """The evicted pod would come back on the DRA side (core/migration/pool_plan.destination's
    words)."""
    return step.fits and "DRA node" in step.goes


def claim_seconds(pods: int, qps: float = KCM_DEFAULT_QPS) -> float:
    """kube-controller-manager's time to write `pods` converted pods back, at `qps`."""
    return pods * WRITES_PER_CONVERTED_POD / qps


def pacing_note(plan: Sequence[Step], qps: float = KCM_DEFAULT_QPS) -> str:
    """A warning for a wave whose converted pods would keep kube-controller-manager busy longer
    than PACING_WARN_SECONDS at `qps` ("" otherwise)."""
    pods = sum(1 for step in plan if comes_back_converted(step))
    seconds = claim_seconds(pods, qps)
    if seconds < PACING_WARN_SECONDS:
        return ""
    return (
        f"{pods} evicted GPU pods come back converted: kube-controller-manager writes each one's"
        f" pod and claim through one client (--kube-api-qps {qps:g} by default), about"
        f" {seconds:.0f} s before the last claim exists; raise its --kube-api-qps and"
        " --kube-api-burst (docs/migration.md) or lower --batch"
    )


def awaiting_claims(pod: JsonObject) -> bool:
    """The pod names a ResourceClaimTemplate whose claim kube-controller-manager has not
    written yet (no entry in `status.resourceClaimStatuses`); a pod still gated (its claims
    wait for the gate, e.g. the GPU quota's), ended or ending is not waiting for it."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    if metadata.get("deletionTimestamp") or status.get("phase") in ENDED:
        return False
    if spec.get("schedulingGates"):
        return False
    wanted = {
        str(entry.get("name"))
        for entry in spec.get("resourceClaims") or []
        if isinstance(entry, dict) and entry.get("resourceClaimTemplateName")
    }
    written = {
        str(entry.get("name"))
        for entry in status.get("resourceClaimStatuses") or []
        if isinstance(entry, dict)
    }
    return bool(wanted - written)


def waiting_pods(pods: Iterable[JsonObject]) -> list[str]:
    """`namespace/name` of the pods awaiting their claims."""
    return [
        f"{(p.get('metadata') or {}).get('namespace')}/{(p.get('metadata') or {}).get('name')}"
        for p in pods
        if awaiting_claims(p)
    ]
