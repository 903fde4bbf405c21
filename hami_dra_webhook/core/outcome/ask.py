"""What one container asks of a vendor's DRA driver, in a form every vendor profile fills the
same way, and the `devices` of the ResourceClaimTemplate that asks it."""

from __future__ import annotations

from dataclasses import dataclass, field

from hami_dra_webhook.core.model.types import JsonObject

# kube-apiserver 1.38 (declarative validation of CapacityRequirements.requests:
# `+k8s:maxProperties=32`, `+k8s:eachVal=+k8s:minimum=0`): a request's capacity map holds at most
# 32 entries, none negative. Earlier versions checked neither; every profile keeps to both.
MAX_CAPACITY_ENTRIES = 32


@dataclass(frozen=True, slots=True)
class Alternative:
    """One way to satisfy a device request: its selectors and the capacity it consumes. More
    than one become `firstAvailable` subrequests (e.g. one per Hygon compute-unit count)."""

    selectors: tuple[str, ...]
    capacity: tuple[tuple[str, str], ...] = ()  # (capacity key, quantity), in order
    name: str = ""  # the subrequest's name when there are several

    def __post_init__(self) -> None:
        if len(self.capacity) > MAX_CAPACITY_ENTRIES:
            raise ValueError(
                f"{len(self.capacity)} capacity requests: at most 32 (Kubernetes 1.38)"
            )
        negative = [key for key, amount in self.capacity if amount.lstrip().startswith("-")]
        if negative:
            raise ValueError(f"negative capacity request {negative} (Kubernetes 1.38 refuses it)")


@dataclass(frozen=True, slots=True)
class DeviceAsk:
    """`count` devices of one vendor's DeviceClass, each satisfying one of `alternatives`.

    `distinct_attribute` set: one request of count 1 per device, all constrained to different
    values of it (legacy's "n different cards", for devices that allow several allocations).
    Unset: one request of count n (devices that are allocated whole are distinct anyway)."""

    family: str  # the vendor family's key, e.g. "hygon"
    device_class: str
    request_name: str  # "hcu", "npu", "gpu": requests are named so, or name-0 ... name-(n-1)
    count: int
    alternatives: tuple[Alternative, ...]
    distinct_attribute: str | None
    summary: str  # what the container gets, in words
    whole: bool  # every device whole: no consumable capacity needed to place it as asked
    # Computed once: the template cache looks an ask up for every container it converts.
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        fields = (self.family, self.device_class, self.request_name, self.count)
        more = (self.alternatives, self.distinct_attribute, self.summary, self.whole)
        object.__setattr__(self, "_hash", hash((*fields, *more)))

    def __hash__(self) -> int:
        return self._hash


def ask_devices(ask: DeviceAsk, with_capacity: bool) -> JsonObject:
    """The claim spec's `devices` for the ask; without `with_capacity` (kube-apiserver drops
    consumable capacity) no capacity requests are written, so the stored object is as sent."""
    if ask.distinct_attribute is None or ask.count == 1:
        names, each = [ask.request_name], ask.count
    else:
        names, each = [f"{ask.request_name}-{i}" for i in range(ask.count)], 1
    requests = [{"name": name, **_request(ask, each, with_capacity)} for name in names]
    devices: JsonObject = {"requests": requests}
    if len(names) > 1:
        devices["constraints"] = [{"requests": names, "distinctAttribute": ask.distinct_attribute}]
    return devices


def _request(ask: DeviceAsk, count: int, with_capacity: bool) -> JsonObject:
    if len(ask.alternatives) == 1:
        return {"exactly": _exact(ask, ask.alternatives[0], count, with_capacity)}
    return {
        "firstAvailable": [
            {"name": alternative.name, **_exact(ask, alternative, count, with_capacity)}
            for alternative in ask.alternatives
        ]
    }


def _exact(ask: DeviceAsk, alternative: Alternative, count: int, with_capacity: bool) -> JsonObject:
    exact: JsonObject = {
        "deviceClassName": ask.device_class,
        "allocationMode": "ExactCount",
        "count": count,
        "selectors": [{"cel": {"expression": expression}} for expression in alternative.selectors],
    }
    if with_capacity and alternative.capacity:
        exact["capacity"] = {"requests": dict(alternative.capacity)}
    return exact
