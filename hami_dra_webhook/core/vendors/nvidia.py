"""NVIDIA (docs/kubernetes-facts.md; docs/translation.md): a resolved legacy share
(`GpuShare`, core/legacy.py) as a device ask to the HAMi DRA driver, like every other family's.
One request of one device per GPU, distinct by `uuid`; cores always explicit (the driver's
default, 100, would make a share exclusive); gpumem-percentage as one `firstAvailable`
alternative per card memory size."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from hami_dra_webhook.core import cel
from hami_dra_webhook.core.decision import describe
from hami_dra_webhook.core.legacy import GpuShare
from hami_dra_webhook.core.quantity import MIB, format_bytes, format_mib
from hami_dra_webhook.core.types import ContainerRef, NotConvertible
from hami_dra_webhook.core.vendors.ask import Alternative, DeviceAsk

if TYPE_CHECKING:
    from hami_dra_webhook.core.policy import Policy

FAMILY = "nvidia"
MAX_SUBREQUESTS = 8  # DRA's limit on firstAvailable alternatives


def device_ask(
    share: GpuShare, selectors: tuple[str, ...], ref: ContainerRef, policy: Policy
) -> DeviceAsk:
    if share.percentage is not None:
        _check_sizes(share.percentage, ref, policy)
    return _device_ask(share, selectors, policy)


# Distinct GPU shapes a cluster asks for: dozens; 512 holds them all. (A full cache of 4,096
# held 18.6 MiB together with the template contents', claims._content: ~4.6 KiB a shape.)
@functools.lru_cache(maxsize=512)
def _device_ask(share: GpuShare, selectors: tuple[str, ...], policy: Policy) -> DeviceAsk:
    """Cached: replicas ask the same (the ask is immutable; the template cache keys on it)."""
    web = policy.webhook
    if share.percentage is None:
        alternatives: tuple[Alternative, ...] = (
            Alternative(selectors, _capacity(share.memory_mib, share.cores, policy)),
        )
    else:
        alternatives = _per_size(share.percentage, share.cores, selectors, policy)
    return DeviceAsk(
        family=FAMILY,
        device_class=web.device_class_name,
        request_name="gpu",
        count=share.count,
        alternatives=alternatives,
        # N single-device requests and one distinctAttribute: N different physical GPUs, as in
        # legacy HAMi, on every Kubernetes version (docs/kubernetes-facts.md: DRA's limits).
        distinct_attribute=f"{web.driver_name}/{web.attributes.uuid}",
        summary=describe(share),
        whole=share.is_whole,
    )


def _capacity(memory_mib: int | None, cores: int, policy: Policy) -> tuple[tuple[str, str], ...]:
    keys = policy.webhook.capacity_keys
    capacity: tuple[tuple[str, str], ...] = ((keys.cores, str(cores)),)
    if memory_mib is not None:
        capacity += ((keys.memory, format_mib(memory_mib)),)
    return capacity


def _check_sizes(percentage: int, ref: ContainerRef, policy: Policy) -> None:
    sizes = policy.webhook.device_memory_sizes
    name = policy.nvidia.resource_memory_percentage_name
    if not sizes:
        raise NotConvertible(
            f"{ref.label}: {name}={percentage} needs the cluster's GPU memory sizes;"
            " set hamiDraWebhook.deviceMemorySizes (e.g. [80Gi])",
            code=422,
            reason="no-memory-sizes",
        )
    if len(sizes) > MAX_SUBREQUESTS:
        raise NotConvertible(
            f"{ref.label}: {name} over {len(sizes)} GPU memory sizes needs more than"
            f" {MAX_SUBREQUESTS} DRA alternatives; use gpumem (MiB)",
            code=422,
        )


def _per_size(
    percentage: int, cores: int, selectors: tuple[str, ...], policy: Policy
) -> tuple[Alternative, ...]:
    """gpumem-percentage: memory depends on each device's size, so pin a size per alternative."""
    web = policy.webhook
    alternatives = []
    for size in web.device_memory_sizes:
        quantity = format_bytes(size)
        pinned = (
            *selectors,
            cel.capacity_equals(web.driver_name, web.capacity_keys.memory, quantity),
        )
        memory_mib = max(1, (size // MIB) * percentage // 100)
        capacity = _capacity(memory_mib, cores, policy)
        alternatives.append(Alternative(pinned, capacity, f"mem-{quantity.lower()}"))
    if len(alternatives) == 1:
        return (Alternative(alternatives[0].selectors, alternatives[0].capacity),)
    return tuple(alternatives)
