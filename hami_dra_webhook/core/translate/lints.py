"""What the tools (dry-run, scan, convert) and the workloads' preview say of a pod beyond the
webhook's decision: what would leave it Pending that no admission sees (nothing sends such a
pod to the webhook), and what a converted container loses without a word. Kept off the pod
webhook's path: reading every entry of every GPU container's env there costs a tenth of a
translation (benchmarks.bench, in-process translate_pod)."""

from __future__ import annotations

from typing import Any

from hami_dra_webhook.core.legacy.request import resource_maps
from hami_dra_webhook.core.model.containers import containers
from hami_dra_webhook.core.model.types import Attention
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.vendors.families import names_a_family
from hami_dra_webhook.core.vendors.unknown import names_nvidia, unknown_names

VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"


def pod_notes(pod: Any, policy: Policy) -> list[Attention]:
    """Names that look like HAMi's but that the configuration does not know; HAMi's scheduler
    named by a pod without any HAMi resource (that scheduler leaves with legacy HAMi); an NVIDIA
    GPU container that sets NVIDIA_VISIBLE_DEVICES=all."""
    notes = unknown_names(pod, policy)
    spec = pod.get("spec") if isinstance(pod, dict) else None
    for ref, container in containers(spec):
        limits, requests = resource_maps(container)
        if names_nvidia(limits, requests, policy) and _sees_every_gpu(container):
            notes.append(
                Attention(
                    f"{ref.label}: sets {VISIBLE_DEVICES}=all: with the nvidia runtime it"
                    " sees every GPU of its node, whatever its claim holds; remove it"
                )
            )
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


def _sees_every_gpu(container: Any) -> bool:
    env = container.get("env") if isinstance(container, dict) else None
    return isinstance(env, list) and any(
        isinstance(e, dict) and e.get("name") == VISIBLE_DEVICES and e.get("value") == "all"
        for e in env
    )


# The driver v0.1.0 pins HAMi-core 8c32de6, which reads utilization_switch once per process, at
# cuInit (../shared/NODE-MONITOR.md, section 7): the node monitor's switch reaches only the
# processes that start after it.
SM_LIMIT_NOTE = (
    "{containers}: an SM limit (gpucores {cores}): legacy HAMi's node monitor lifted it while the"
    " pod ran alone on its card; on DRA nodes this chart's node monitor does (monitor.feedback),"
    " but the driver v0.1.0's HAMi-core reads that switch once, when a CUDA process starts: the"
    " pod's first process keeps its limit for its life; the ones started while it is alone on"
    " the card run without it (docs/node-monitor.md)"
)


def sm_limit_note(pod: Any, policy: Policy) -> str:
    """The SM-limit note for a pod whose NVIDIA containers ask for part of a card's cores
    (gpucores strictly between 0 and 100); "" for any other pod."""
    name = policy.nvidia.resource_core_name
    limited: list[tuple[str, str]] = []
    spec = pod.get("spec") if isinstance(pod, dict) else None
    for ref, container in containers(spec):
        limits, requests = resource_maps(container)
        value = limits.get(name, requests.get(name))
        try:
            cores = int(str(value))
        except ValueError:
            continue
        if 0 < cores < 100:
            limited.append((ref.label, str(cores)))
    if not limited:
        return ""
    return SM_LIMIT_NOTE.format(
        containers=", ".join(label for label, _ in limited),
        cores=", ".join(sorted({cores for _, cores in limited})),
    )
