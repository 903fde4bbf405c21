"""What the tools (dry-run, scan, convert) say of a pod beyond the webhook's decision: what
would leave it Pending that no admission sees, since nothing sends such a pod to the webhook."""

from __future__ import annotations

from typing import Any

from hami_dra_webhook.core.containers import containers
from hami_dra_webhook.core.policy import Policy
from hami_dra_webhook.core.types import Attention
from hami_dra_webhook.core.vendors.families import names_a_family
from hami_dra_webhook.core.vendors.unknown import unknown_names


def pod_notes(pod: Any, policy: Policy) -> list[Attention]:
    """Names that look like HAMi's but that the configuration does not know; HAMi's scheduler
    named by a pod without any HAMi resource (that scheduler leaves with legacy HAMi)."""
    notes = unknown_names(pod, policy)
    spec = pod.get("spec") if isinstance(pod, dict) else None
    scheduler = policy.webhook.legacy_scheduler_name
    if (
        isinstance(spec, dict)
        and scheduler
        and spec.get("schedulerName") == scheduler
        and not any(names_a_family(c, policy) for _, c in containers(spec))
    ):
        notes.append(
            Attention(
                f"schedulerName {scheduler} without any HAMi resource: that scheduler leaves"
                " with legacy HAMi, and the pod would stay Pending; remove schedulerName"
            )
        )
    return notes
