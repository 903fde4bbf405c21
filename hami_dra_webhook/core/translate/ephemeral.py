"""Ephemeral containers added to a GPU pod (UPDATE of pods/ephemeralcontainers).

A privileged container sees every GPU device node on its host, outside HAMi-core's limits and
the DRA allocation; the webhook refuses privileged containers in GPU pods at CREATE, and an
ephemeral container (`kubectl debug --profile=sysadmin`) is the other way to add one.
"""

from __future__ import annotations

from typing import Any

from hami_dra_webhook.core.outcome.decision import Refusal
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.translate.claims import DRA_LABEL


def holds_gpus(pod: Any, policy: Policy) -> bool:
    """A pod this webhook converted: labelled, or with a claim from one of its templates
    (claims cannot be removed from a pod, labels can)."""
    if not isinstance(pod, dict):
        return False
    metadata = pod.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    if isinstance(labels, dict) and labels.get(DRA_LABEL) == "true":
        return True
    spec = pod.get("spec")
    claims = spec.get("resourceClaims") if isinstance(spec, dict) else None
    prefix = policy.webhook.template_name_prefix
    return isinstance(claims, list) and any(
        isinstance(claim, dict)
        and isinstance(claim.get("resourceClaimTemplateName"), str)
        and claim["resourceClaimTemplateName"].startswith(prefix)
        for claim in claims
    )


def _ephemeral(pod: Any) -> list[Any]:
    spec = pod.get("spec") if isinstance(pod, dict) else None
    found = spec.get("ephemeralContainers") if isinstance(spec, dict) else None
    return found if isinstance(found, list) else []


def privileged_ephemeral(new: Any, old: Any, policy: Policy) -> Refusal | None:
    """The refusal for a privileged ephemeral container added to a GPU pod, if one is."""
    if not policy.webhook.refuse_privileged or not holds_gpus(new, policy):
        return None
    before = {c.get("name") for c in _ephemeral(old) if isinstance(c, dict)}
    for container in _ephemeral(new):
        if not isinstance(container, dict) or container.get("name") in before:
            continue
        context = container.get("securityContext")
        if isinstance(context, dict) and context.get("privileged") is True:
            name = str(container.get("name"))[:63]
            return Refusal(
                code=403,
                message=f"ephemeral container {name!r} is privileged in a pod that holds GPUs:"
                " a privileged container sees every GPU on the node; debug without privileged"
                " (or set hamiDraWebhook.refusePrivileged: false)",
                warnings=[],
                reason="privileged-ephemeral",
            )
    return None
