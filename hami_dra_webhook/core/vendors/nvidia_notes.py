"""What legacy HAMi did to an NVIDIA container that DRA does differently, said in the words every
tool and the webhook use (docs/translation.md, "Switches and scaling"):

- `CUDA_DISABLE_CONTROL=true` in a container's env: HAMi v2.10's device plugin then mounted no
  `/etc/ld.so.preload`, so the container ran without HAMi-core (no memory or SM limit). The
  DRA driver v0.1.0 always mounts it: the claim's limits apply. Converted, with a warning.
- `deviceMemoryScaling`: the device plugin registered each card's memory times the scaling,
  and gpumem-percentage counts from that; the webhook counts the same way, so the container's
  limit is legacy's. Above 1, legacy let a card's tasks share more memory than it has
  (`CUDA_OVERSUBSCRIBE`); DRA gives each claim real memory: fewer such pods share a card, and a
  share above the card gets the whole card's memory.
- `deviceSplitCount` (10 tasks per card when unset): no DRA equivalent; a policy note.
"""

from __future__ import annotations

from typing import Any

from hami_dra_webhook.core.legacy.selectors import GO_TRUE  # HAMi reads both with ParseBool
from hami_dra_webhook.core.model.quantity import MIB
from hami_dra_webhook.core.model.types import Attention, ContainerRef
from hami_dra_webhook.core.settings.policy import Policy

DISABLE_CONTROL_ENV = "CUDA_DISABLE_CONTROL"
LEGACY_SPLIT_COUNT = 10  # HAMi's default deviceSplitCount


def hami_core_disabled(container: Any) -> str | None:
    """The value of CUDA_DISABLE_CONTROL when it turns HAMi-core off in legacy HAMi (a literal
    `value` Go's ParseBool reads as true; `valueFrom` is not read by the device plugin)."""
    env = container.get("env") if isinstance(container, dict) else None
    if not isinstance(env, list):
        return None
    for entry in env:
        if isinstance(entry, dict) and entry.get("name") == DISABLE_CONTROL_ENV:
            value = entry.get("value")
            if isinstance(value, str) and value in GO_TRUE:
                return value
    return None


def disabled_control_note(ref: ContainerRef, value: str) -> Attention:
    # The consequence first: kube-apiserver cuts an admission warning at 120 characters.
    return Attention(
        f"{ref.label}: {DISABLE_CONTROL_ENV}={value} is not honoured: the DRA driver v0.1.0"
        " always loads HAMi-core, so the claim's limits apply (legacy HAMi ran the container"
        " without it): remove the variable, or keep the pod on legacy HAMi while legacy nodes"
        " remain (label hami.io/webhook=ignore)"
    )


def scaled_memory_mib(size_bytes: int, percentage: int, policy: Policy) -> int:
    """gpumem-percentage of a card as legacy HAMi counted it: floor(registered x p / 100),
    registered = int32(MiB x deviceMemoryScaling); at most the card's memory (DRA cannot give
    more), at least 1 MiB."""
    card_mib = size_bytes // MIB
    registered = int(card_mib * policy.nvidia.device_memory_scaling)
    return max(1, min(card_mib, registered * percentage // 100))


def percentage_notes(ref: ContainerRef, percentage: int, policy: Policy) -> list[str]:
    """What a deviceMemoryScaling other than 1 does to a gpumem-percentage share."""
    scaling = policy.nvidia.device_memory_scaling
    if scaling == 1:
        return []
    name = policy.nvidia.resource_memory_percentage_name
    sizes = policy.webhook.device_memory_sizes
    per_card = ", ".join(
        f"{scaled_memory_mib(size, percentage, policy)} MiB of {size // MIB}" for size in sizes
    )
    counted = f"{name}={percentage} counts from memory x deviceMemoryScaling {scaling:g}"
    if scaling < 1:
        return [f"{ref.label}: {counted}, as in legacy HAMi ({per_card})"]
    notes: list[str] = [
        f"{ref.label}: {counted}, as in legacy HAMi ({per_card}); DRA does not oversubscribe,"
        " so fewer such pods share a card"
    ]
    if percentage * scaling > 100:
        notes.append(
            Attention(
                f"{ref.label}: {name}={percentage} x deviceMemoryScaling {scaling:g} is more than"
                " a card's memory: it gets the whole card's (legacy HAMi oversubscribed it); ask"
                f" for at most {int(100 // scaling)} to share a card"
            )
        )
    return notes


def over_card_note(ref: ContainerRef, memory_mib: int, policy: Policy) -> Attention | None:
    """A memory share above the largest card: never placed (with why, where scaling is why)."""
    largest = policy.largest_memory_mib
    if not largest or memory_mib <= largest:
        return None
    scaling = policy.nvidia.device_memory_scaling
    why = (
        f" (legacy HAMi fitted it in the card's memory x deviceMemoryScaling {scaling:g};"
        " DRA does not oversubscribe)"
        if scaling > 1 and memory_mib <= int(largest * scaling)
        else ""
    )
    return Attention(
        f"{ref.label}: {memory_mib} MiB is more than the largest GPU ({largest} MiB): it can"
        f" never be placed{why}"
    )


def policy_notes(policy: Policy) -> list[str]:
    """What the settings themselves keep or lose, said once by each tool and at the webhook's
    start (not on every pod)."""
    nvidia = policy.nvidia
    split = nvidia.device_split_count
    notes = [
        f"nvidia.deviceSplitCount ({split if split is not None else LEGACY_SPLIT_COUNT}"
        f"{'' if split is not None else ', the default'}): legacy HAMi put at most that many"
        " tasks on a card; DRA has no such cap and packs shares as memory and cores allow"
    ]
    if nvidia.device_memory_scaling > 1:
        notes.append(
            f"nvidia.deviceMemoryScaling {nvidia.device_memory_scaling:g}: legacy HAMi"
            " oversubscribed each card's memory; DRA gives claims the card's real memory, so"
            " fewer shares fit a card (gpumem-percentage still counts from the scaled memory)"
        )
    if nvidia.disable_core_limit:
        applied = (
            f"gpuCorePolicy {nvidia.gpu_core_policy} wins, as in legacy HAMi"
            if nvidia.gpu_core_policy != "default"
            else "the webhook sets GPU_CORE_UTILIZATION_POLICY=disable in every GPU container"
        )
        notes.append(f"nvidia.disableCoreLimit: {applied}")
    return notes
