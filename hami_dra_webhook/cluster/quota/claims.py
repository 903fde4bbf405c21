"""A released pod's claims cannot grow under it (issue 61).

The quota pass releases a held pod once its claims exist and fit (core/quota/quota_plan.py).
Until kube-scheduler allocates them and reserves them for the pod, a claim can still be deleted,
and another made under its name: a tenant's claim re-created asking more, or a claim made
again from a ResourceClaimTemplate the tenant replaced (kube-controller-manager re-creates a
pod's deleted claim from its template, and adopts one the tenant made with the pod as owner).
The pod would then take what the pass never counted. So, in a namespace whose GPU quota holds
its pods, the creation of a claim of a kept group's DeviceClass is refused where a live pod that
is no longer held would use it: one that names it (`resourceClaimName`), or the pod it is made
for (its controller owner). A held pod's claims are free to come and go: the pass waits for
them and counts them as they are when it releases the pod. Claims kube-scheduler makes for a
pod's extended resources are what the pass charged it for (from the pod's own resources, which
cannot change), and are never refused.
"""

from __future__ import annotations

from hami_dra_webhook.core.model.pod_view import PodView
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.quota.gpu_quota import GATE
from hami_dra_webhook.core.quota.quota_groups import option_of
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.kube.port import KubeApi

LIVE = "status.phase!=Succeeded,status.phase!=Failed"


def asks_kept_devices(claim: JsonObject, policy: Policy) -> bool:
    """Whether any way of any request of the claim asks a kept group's DeviceClass."""
    requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests")
    for request in requests[:32] if isinstance(requests, list) else []:
        if not isinstance(request, dict):
            continue
        ways = [request.get("exactly"), *(request.get("firstAvailable") or [])[:8]]
        if any(isinstance(w, dict) and option_of(w, policy) is not None for w in ways):
            return True
    return False


async def claim_refusal(
    api: KubeApi, namespace: str, claim: JsonObject, policy: Policy, timeout: float
) -> str | None:
    """Why the claim may not be created now (it would grow what a released pod holds), or None."""
    if not asks_kept_devices(claim, policy):
        return None
    metadata = claim.get("metadata") or {}
    owner = next(
        (
            o
            for o in metadata.get("ownerReferences") or []
            if isinstance(o, dict) and o.get("kind") == "Pod" and o.get("controller")
        ),
        None,
    )
    if owner is not None:
        selector = f"metadata.name={owner.get('name', '')},{LIVE}"
        async for page in api.pod_pages(namespace, timeout=timeout, field_selector=selector):
            for pod in page:
                view = PodView.of(pod)
                if view.uid == owner.get("uid") and _released(view):
                    return _words(namespace, view, "made for it")
        return None
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        return None  # a generated name no pod can name yet
    async for page in api.pod_pages(namespace, timeout=timeout, field_selector=LIVE):
        for pod in page:
            view = PodView.of(pod)
            if name in view.named_claims() and _released(view):
                return _words(namespace, view, "it names")
    return None


def _released(pod: PodView) -> bool:
    return not pod.ended and pod.gate_index(GATE) is None


def _words(namespace: str, pod: PodView, how: str) -> str:
    name = pod.name
    return (
        f"pod {namespace}/{name} was released by its namespace's GPU quota with the claim {how}"
        " as it was then; a claim created again under it could ask more than was counted."
        f" Delete pod {name} (its controller creates it again, held until it fits) and then"
        " create the claim"
    )
