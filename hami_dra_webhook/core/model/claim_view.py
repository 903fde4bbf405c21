"""A ResourceClaim as the cluster side reads it: parsed once, where it comes in, into a typed
view, so that the code behind reads attributes instead of chains of `.get` (issue 66).

What is read is the cluster's answer, which a tenant writes in part (its own claims, their
reservations): every field is taken only in the shape Kubernetes gives it (text where text
belongs, lists where lists do) and bounded by the API's own limits, so a claim the API would not
hold reads as less, never as an error."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# resource.k8s.io/v1 limits (ResourceClaimReservedForMaxSize, AllocationResultsMaxSize).
MAX_RESERVED_FOR = 256
MAX_RESULTS = 32


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    """One allocation result: a device a driver gave the claim's request."""

    request: str
    driver: str
    pool: str
    device: str
    consumed: tuple[tuple[str, str], ...] = ()  # consumedCapacity, as (name, quantity)
    # Whether the result has a consumedCapacity at all (none: the whole device, exclusively).
    shares: bool = False

    def consumed_of(self, name: str) -> str | None:
        return next((value for key, value in self.consumed if key == name), None)


@dataclass(frozen=True, slots=True)
class Reservation:
    """An entry of `status.reservedFor`: who uses the claim."""

    resource: str  # "pods" for a pod
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class ClaimView:
    namespace: str
    name: str
    uid: str = ""
    allocated: bool = False
    results: tuple[AllocatedDevice, ...] = ()
    reserved_for: tuple[Reservation, ...] = ()
    # The nodes the allocation's node selector names by `metadata.name` (how kube-scheduler
    # pins an allocation of node-local devices).
    node_names: frozenset[str] = frozenset()

    @classmethod
    def of(cls, claim: object) -> ClaimView:
        item = _map(claim)
        metadata, status = _map(item.get("metadata")), _map(item.get("status"))
        allocation = status.get("allocation")
        allocated = isinstance(allocation, dict)
        results = _list(_map(_map(allocation).get("devices")).get("results"))[:MAX_RESULTS]
        reserved = _list(status.get("reservedFor"))[:MAX_RESERVED_FOR]
        return cls(
            namespace=_text(metadata.get("namespace")),
            name=_text(metadata.get("name")),
            uid=_text(metadata.get("uid")),
            allocated=allocated,
            results=tuple(_device(r) for r in results if isinstance(r, dict)),
            reserved_for=tuple(_reservation(r) for r in reserved if isinstance(r, dict)),
            node_names=_selected_nodes(_map(allocation).get("nodeSelector")),
        )

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name

    def results_of(self, driver: str) -> tuple[AllocatedDevice, ...]:
        """The allocation results that name `driver` (none when it is not allocated)."""
        return tuple(result for result in self.results if result.driver == driver)

    @property
    def reserved_pod_uids(self) -> tuple[str, ...]:
        return tuple(r.uid for r in self.reserved_for if r.resource == "pods" and r.uid)

    def words(self) -> str:
        """`namespace/name (reserved for pod a, b)`, for messages."""
        pods = [r.name for r in self.reserved_for if r.resource == "pods"]
        reserved = f" (reserved for pod {', '.join(pods)})" if pods else ""
        return f"{self.namespace}/{self.name}{reserved}"


def _device(result: dict[str, Any]) -> AllocatedDevice:
    consumed = _map(result.get("consumedCapacity"))
    return AllocatedDevice(
        request=_text(result.get("request")),
        driver=_text(result.get("driver")),
        pool=_text(result.get("pool")),
        device=_text(result.get("device")),
        consumed=tuple((str(k), _text(v)) for k, v in consumed.items() if _text(v)),
        shares=isinstance(result.get("consumedCapacity"), dict),
    )


def _reservation(entry: dict[str, Any]) -> Reservation:
    return Reservation(
        resource=_text(entry.get("resource")),
        name=_text(entry.get("name")),
        uid=_text(entry.get("uid")),
    )


def _selected_nodes(selector: object) -> frozenset[str]:
    names: set[str] = set()
    for term in _list(_map(selector).get("nodeSelectorTerms")):
        for entry in _list(_map(term).get("matchFields")):
            requirement = _map(entry)
            if requirement.get("key") == "metadata.name" and requirement.get("operator") == "In":
                names.update(v for v in _list(requirement.get("values")) if isinstance(v, str))
    return frozenset(names)


def _map(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: object) -> str:
    """Text as the API gives it; a number (a quantity may come as one) as its text."""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return ""
