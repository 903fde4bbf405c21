"""Reading a container's legacy HAMi request and resolving it with legacy HAMi v2.10's rules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hami_dra_webhook.core.model.quantity import QuantityError, parse_plain_integer
from hami_dra_webhook.core.model.types import Attention, ContainerRef, NotConvertible
from hami_dra_webhook.core.settings.policy import Policy

MAX_CLAIM_DEVICES = 32
# A capacity request is a Kubernetes quantity: at most 2^63 - 1 bytes.
MAX_MEMORY_MIB = (2**63 - 1) // 2**20


@dataclass(frozen=True, slots=True)
class LegacyRequest:
    """The five legacy values of one container, validated; None where a key is absent."""

    count: int | None
    memory: int | None
    percentage: int | None
    cores: int | None
    priority: int | None
    # Which keys sit in limits and which in requests: all of them leave the pod.
    in_limits: tuple[str, ...]
    in_requests: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class GpuShare:
    """What one container gets under DRA: `count` devices, each with this memory and these cores."""

    count: int
    memory_mib: int | None  # None: the whole device's memory
    percentage: int | None  # memory as a percentage of each device's total (0 < p < 100)
    cores: int

    @property
    def is_whole(self) -> bool:
        """Every device whole: all its memory and all its cores."""
        return self.memory_mib is None and self.percentage is None and self.cores == 100


def resource_maps(container: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The container's limits and requests, tolerating absent or malformed parts."""
    resources = container.get("resources") if isinstance(container, dict) else None
    if not isinstance(resources, dict):
        return {}, {}
    limits = resources.get("limits")
    requests = resources.get("requests")
    return (
        limits if isinstance(limits, dict) else {},
        requests if isinstance(requests, dict) else {},
    )


def has_legacy_keys(container: Any, names: tuple[str, ...] | frozenset[str]) -> bool:
    limits, requests = resource_maps(container)
    return (bool(limits) and not limits.keys().isdisjoint(names)) or (
        bool(requests) and not requests.keys().isdisjoint(names)
    )


def read_request(container: dict[str, Any], ref: ContainerRef, policy: Policy) -> LegacyRequest:
    """Validate the legacy values as kube-apiserver would have, had they stayed on the pod."""
    limits, requests = resource_maps(container)
    names = policy.legacy_resource_names

    def value(name: str, memory: bool = False) -> int | None:
        return _one_value(name, limits, requests, ref, memory=memory)

    return LegacyRequest(
        count=value(names.gpus),
        memory=value(names.memory, memory=True),
        percentage=value(names.percentage),
        cores=value(names.cores),
        priority=value(names.priority),
        in_limits=tuple(n for n in names if n in limits),
        in_requests=tuple(n for n in names if n in requests),
    )


def read_vendor_request(
    container: dict[str, Any],
    ref: ContainerRef,
    count: str | tuple[str, ...],
    memory: str | tuple[str, ...] = "",
    cores: str | tuple[str, ...] = "",
) -> LegacyRequest:
    """A vendor's count, memory and cores values (no percentage, no priority), validated as for
    NVIDIA. A role may have several names (Hygon's `dcu*` and `hcu*`): at most one may be set."""
    limits, requests = resource_maps(container)

    def value(names: str | tuple[str, ...], memory: bool = False) -> int | None:
        present = [n for n in _as_names(names) if n in limits or n in requests]
        if len(present) > 1:
            raise NotConvertible(
                f"{ref.label}: {' and '.join(present)} name the same thing in two spellings;"
                " keep one",
                code=422,
                reason="duplicate-resource-spellings",
            )
        return _one_value(present[0], limits, requests, ref, memory=memory) if present else None

    every = (*_as_names(count), *_as_names(memory), *_as_names(cores))
    return LegacyRequest(
        count=value(count),
        memory=value(memory, memory=True),
        percentage=None,
        cores=value(cores),
        priority=None,
        in_limits=tuple(n for n in every if n in limits),
        in_requests=tuple(n for n in every if n in requests),
    )


def _as_names(names: str | tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(names, str):
        return (names,) if names else ()
    return tuple(dict.fromkeys(n for n in names if n))


def _one_value(
    name: str, limits: dict[str, Any], requests: dict[str, Any], ref: ContainerRef, *, memory: bool
) -> int | None:
    in_limits, in_requests = name in limits, name in requests
    if not in_limits and not in_requests:
        return None
    parsed = {}
    for where, source, present in (
        ("limits", limits, in_limits),
        ("requests", requests, in_requests),
    ):
        if not present:
            continue
        raw = source[name]
        try:
            parsed[where] = parse_plain_integer(raw)
        except QuantityError as error:
            hint = (
                f"; {name.rpartition('/')[2]} is in MiB: write e.g. 16384 for 16 GiB"
                if memory
                else "; write a non-negative whole number"
            )
            raise NotConvertible(
                f"{ref.label}: {where} {name}={raw!s} {error.reason}{hint}",
                code=422,
                reason="bad-quantity",
            ) from error
    if len(parsed) == 2 and parsed["limits"] != parsed["requests"]:
        raise NotConvertible(
            f"{ref.label}: {name} request {requests[name]!s} differs from its limit"
            f" {limits[name]!s}; set both to the same value or only the limit",
            code=422,
            reason="request-differs-from-limit",
        )
    return parsed.get("limits", parsed.get("requests"))


def resolve_share(
    request: LegacyRequest, ref: ContainerRef, policy: Policy, warnings: list[str]
) -> GpuShare | None:
    """Apply legacy HAMi v2.10's rules in its order; None means the container gets no device."""
    nvidia = policy.nvidia
    # Present even when 0: v2.10 treats gpumem-percentage 0 like gpumem 0 (not exclusive,
    # memory from defaultMemory, else the whole card).
    percentage = request.percentage
    if percentage is not None and percentage > 100:
        raise NotConvertible(
            f"{ref.label}: {nvidia.resource_memory_percentage_name}={percentage} is above 100;"
            " give a percentage from 1 to 100",
            code=422,
            reason="memory-percentage-above-100",
        )
    count = request.count
    if count is None:
        if request.memory is None and percentage is None and request.cores is None:
            return None
        if nvidia.default_gpu_num == 0:
            warnings.append(
                f"{ref.label}: GPU values ignored, no {nvidia.resource_count_name} and"
                " defaultGPUNum is 0 (as legacy HAMi)"
            )
            return None
        count = nvidia.default_gpu_num
    if count == 0:
        if request.memory or request.percentage or request.cores:
            warnings.append(
                Attention(
                    f"{ref.label}: {nvidia.resource_count_name}=0 means no GPU: its other GPU"
                    " values are dropped (as legacy HAMi)"
                )
            )
        return None
    if count > MAX_CLAIM_DEVICES:
        raise NotConvertible(
            f"{ref.label}: {nvidia.resource_count_name}={count} is more than the"
            f" {MAX_CLAIM_DEVICES} devices a DRA claim can hold;"
            f" request at most {MAX_CLAIM_DEVICES}",
            code=422,
            reason="too-many-devices",
        )
    cores = _cores(request, percentage, ref, policy, warnings)
    memory_mib, share_percentage = _memory(request, percentage, ref, policy, warnings)
    return GpuShare(count=count, memory_mib=memory_mib, percentage=share_percentage, cores=cores)


def _memory(
    request: LegacyRequest,
    percentage: int | None,
    ref: ContainerRef,
    policy: Policy,
    warnings: list[str],
) -> tuple[int | None, int | None]:
    """(memory MiB, percentage of each card's memory): at most one set; neither is the whole
    card."""
    nvidia = policy.nvidia
    memory_mib: int | None = None
    share_percentage: int | None = None
    if request.memory:  # gpumem 0 counts as absent for memory, as in legacy HAMi
        memory_mib = request.memory * nvidia.memory_factor
        if percentage is not None:
            warnings.append(
                f"{ref.label}: {nvidia.resource_memory_percentage_name} ignored,"
                f" {nvidia.resource_memory_name} wins (as legacy HAMi)"
            )
    elif percentage:  # 0, like gpumem 0, falls through to defaultMemory
        share_percentage = percentage if percentage < 100 else None
    elif nvidia.default_memory:
        memory_mib = nvidia.default_memory
    if memory_mib is not None and memory_mib > MAX_MEMORY_MIB:
        raise NotConvertible(
            f"{ref.label}: {memory_mib} MiB of GPU memory ({nvidia.resource_memory_name} times"
            f" memoryFactor {nvidia.memory_factor}, or defaultMemory) is more than a Kubernetes"
            f" quantity holds ({MAX_MEMORY_MIB} MiB); no device could ever be allocated",
            code=422,
            reason="memory-too-large",
        )
    return memory_mib, share_percentage


def _cores(
    request: LegacyRequest,
    percentage: int | None,
    ref: ContainerRef,
    policy: Policy,
    warnings: list[str],
) -> int:
    if request.cores is not None:
        if request.cores > 100:
            warnings.append(
                f"{ref.label}: {policy.nvidia.resource_core_name}={request.cores} clamped to 100"
            )
            return 100
        return request.cores
    # Legacy rule 2: a count without gpucores is exclusive at 100 %, or when no memory is asked for.
    exclusive = percentage == 100 if percentage is not None else request.memory is None
    return 100 if exclusive else policy.nvidia.default_cores
