"""A coordination.k8s.io Lease as its holders read it: parsed once into a typed view, every
field taken only in the shape Kubernetes gives it (core/model/shapes.py). The writer keeps the
object itself (fields it does not know of are written back as they were)."""

from __future__ import annotations

from dataclasses import dataclass

from hami_dra_webhook.core.model import kube_time
from hami_dra_webhook.core.model.shapes import as_map, as_text

MAX_DURATION = 3600  # seconds: a duration above it is read as this (no Lease waits an hour)


@dataclass(frozen=True, slots=True)
class LeaseView:
    holder: str = ""  # "" when no one holds it (released)
    duration: int = 0  # leaseDurationSeconds
    renew_time: str = ""
    transitions: int = 0
    resource_version: str = ""

    @classmethod
    def of(cls, lease: object) -> LeaseView:
        item = as_map(lease)
        spec = as_map(item.get("spec"))
        return cls(
            holder=as_text(spec.get("holderIdentity")),
            duration=_seconds(spec.get("leaseDurationSeconds")),
            renew_time=as_text(spec.get("renewTime")),
            transitions=_seconds(spec.get("leaseTransitions"), limit=2**31 - 1),
            resource_version=as_text(as_map(item.get("metadata")).get("resourceVersion")),
        )

    def free_in(self, identity: str, now: float | None = None) -> float:
        """Seconds until it is free for `identity` (0: free now, or already its own); a renew
        time that cannot be read has expired."""
        if self.holder in ("", identity):
            return 0.0
        age = kube_time.age(self.renew_time, now)
        return 0.0 if age is None else max(0.0, self.duration - age)


def _seconds(value: object, limit: int = MAX_DURATION) -> int:
    """A whole count as the API writes it (int32), bounded; 0 for anything else."""
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return max(0, min(value, limit))
