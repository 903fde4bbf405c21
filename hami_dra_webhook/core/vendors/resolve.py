"""One container of a converted family beyond NVIDIA: its legacy values read and validated, and
what it gets under DRA (a `DeviceAsk`), by the family's profile."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hami_dra_webhook.core.legacy import LegacyRequest, read_vendor_request, resource_maps
from hami_dra_webhook.core.types import ContainerRef, NotConvertible
from hami_dra_webhook.core.vendor_config import VnpuChip
from hami_dra_webhook.core.vendors import ascend, hygon, whole
from hami_dra_webhook.core.vendors.ask import DeviceAsk

if TYPE_CHECKING:
    from hami_dra_webhook.core.decision import ContainerPlan
    from hami_dra_webhook.core.policy import Policy


@dataclass(frozen=True, slots=True)
class VendorContainer:
    plan: ContainerPlan
    record: str  # the legacy request, as the template's annotation keeps it
    runtime_class: str  # what the pod needs for this container's devices ("" nothing)


def resolve_vendor(
    family: str,
    ref: ContainerRef,
    container: Any,
    annotations: dict[str, Any],
    policy: Policy,
    warnings: list[str],
) -> VendorContainer:
    from hami_dra_webhook.core.decision import ContainerPlan  # decision imports this package

    vendors, sections = policy.webhook.vendors, policy.hami_vendors
    runtime_class = ""
    ask: DeviceAsk | None
    if family == hygon.FAMILY:
        count, memory, cores = hygon.role_names(sections)
        request = read_vendor_request(container, ref, count, memory, cores)
        _requests_only(request, ref, warnings)
        ask = hygon.device_ask(request, ref, annotations, sections, vendors.hygon, warnings)
    elif family == ascend.FAMILY:
        chip = _chip(container, ref, sections.vnpus)
        request = read_vendor_request(
            container, ref, chip.resource_name, chip.resource_memory_name, chip.resource_core_name
        )
        _requests_only(request, ref, warnings)
        ask = ascend.device_ask(chip, request, ref, annotations, vendors.ascend, warnings)
        runtime_class = chip.runtime_class_name or vendors.ascend.runtime_class_name
    elif family in (whole.AMD.key, whole.NEURON.key):
        profile, names, settings = (
            (whole.AMD, sections.amd, vendors.amd)
            if family == whole.AMD.key
            else (whole.NEURON, sections.awsneuron, vendors.aws_neuron)
        )
        request = read_vendor_request(
            container,
            ref,
            names.resource_count_name,
            names.resource_memory_name,
            names.resource_core_name,
        )
        _requests_only(request, ref, warnings)
        ask = whole.device_ask(profile, names, request, ref, annotations, settings, warnings)
    else:  # families() converts only these; a new one must be added here
        raise ValueError(f"no profile converts the family {family!r}")  # a programming error
    plan = ContainerPlan(ref, request, None, family=family, ask=ask)
    return VendorContainer(plan, _record(container, request), runtime_class if ask else "")


def _chip(container: Any, ref: ContainerRef, chips: tuple[VnpuChip, ...]) -> VnpuChip:
    limits, requests = resource_maps(container)
    keys = set(limits) | set(requests)
    named = [
        chip
        for chip in chips
        if keys & {chip.resource_name, chip.resource_memory_name, chip.resource_core_name}
    ]
    if len(named) > 1:
        raise NotConvertible(
            f"{ref.label} asks for NPUs of {len(named)} chips"
            f" ({', '.join(c.common_word for c in named)}); legacy HAMi gives a container one"
            " chip: keep one",
            code=422,
        )
    return named[0]


def _requests_only(request: LegacyRequest, ref: ContainerRef, warnings: list[str]) -> None:
    for name in request.in_requests:
        if name not in request.in_limits:
            warnings.append(f"{ref.label}: {name} set only in requests; converted as its limit")


def _record(container: Any, request: LegacyRequest) -> str:
    limits, requests = resource_maps(container)
    return ",".join(
        f"{name}={limits.get(name, requests.get(name))}"
        for name in dict.fromkeys((*request.in_limits, *request.in_requests))
    )
