"""A ResourceQuota as the GPU quota work reads it (the limits a namespace's quotas set):
parsed once into a typed view, every field taken only in the shape Kubernetes gives it
(core/model/shapes.py), so that a quota of another shape reads as one that limits nothing,
never as an error."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from hami_dra_webhook.core.model.shapes import as_map, as_text, text_map


@dataclass(frozen=True, slots=True)
class ResourceQuotaView:
    name: str
    namespace: str
    hard: Mapping[str, str] = field(default_factory=dict)  # spec.hard: key -> quantity

    @classmethod
    def of(cls, quota: object) -> ResourceQuotaView:
        item = as_map(quota)
        metadata, spec = as_map(item.get("metadata")), as_map(item.get("spec"))
        return cls(
            name=as_text(metadata.get("name")),
            namespace=as_text(metadata.get("namespace")),
            hard=text_map(spec.get("hard")),
        )

    @property
    def where(self) -> str:
        """namespace/name, as the reports name it."""
        return f"{self.namespace}/{self.name}"
