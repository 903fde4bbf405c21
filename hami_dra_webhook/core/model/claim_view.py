"""A ResourceClaim as the cluster side reads it: parsed once, where it comes in, into a typed
view, so that the code behind reads attributes instead of chains of `.get` (issue 66).

What is read is the cluster's answer, which a tenant writes in part (its own claims, their
reservations): every field is taken only in the shape Kubernetes gives it (text where text
belongs, lists where lists do) and bounded by the API's own limits, so a claim the API would not
hold reads as less, never as an error."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hami_dra_webhook.core.model.shapes import as_list, as_map, as_text

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
        item = as_map(claim)
        metadata, status = as_map(item.get("metadata")), as_map(item.get("status"))
        allocation = status.get("allocation")
        allocated = isinstance(allocation, dict)
        results = as_list(as_map(as_map(allocation).get("devices")).get("results"))[:MAX_RESULTS]
        reserved = as_list(status.get("reservedFor"))[:MAX_RESERVED_FOR]
        return cls(
            namespace=as_text(metadata.get("namespace")),
            name=as_text(metadata.get("name")),
            uid=as_text(metadata.get("uid")),
            allocated=allocated,
            results=tuple(_device(r) for r in results if isinstance(r, dict)),
            reserved_for=tuple(_reservation(r) for r in reserved if isinstance(r, dict)),
            node_names=_selected_nodes(as_map(allocation).get("nodeSelector")),
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
    consumed = as_map(result.get("consumedCapacity"))
    return AllocatedDevice(
        request=as_text(result.get("request")),
        driver=as_text(result.get("driver")),
        pool=as_text(result.get("pool")),
        device=as_text(result.get("device")),
        consumed=tuple((str(k), as_text(v)) for k, v in consumed.items() if as_text(v)),
        shares=isinstance(result.get("consumedCapacity"), dict),
    )


def _reservation(entry: dict[str, Any]) -> Reservation:
    return Reservation(
        resource=as_text(entry.get("resource")),
        name=as_text(entry.get("name")),
        uid=as_text(entry.get("uid")),
    )


def _selected_nodes(selector: object) -> frozenset[str]:
    names: set[str] = set()
    for term in as_list(as_map(selector).get("nodeSelectorTerms")):
        for entry in as_list(as_map(term).get("matchFields")):
            requirement = as_map(entry)
            if requirement.get("key") == "metadata.name" and requirement.get("operator") == "In":
                names.update(v for v in as_list(requirement.get("values")) if isinstance(v, str))
    return frozenset(names)
