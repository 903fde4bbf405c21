"""A Node as the cluster side reads it (a pool's member, a move's record): parsed once into a
typed view, every field taken only in the shape Kubernetes gives it (core/model/shapes.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from hami_dra_webhook.core.model.shapes import as_map, as_text, text_map


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str  # "" when the object has no name: not a node to judge
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    allocatable: Mapping[str, str] = field(default_factory=dict)  # resource -> quantity

    @classmethod
    def of(cls, node: object) -> NodeView:
        item = as_map(node)
        metadata = as_map(item.get("metadata"))
        return cls(
            name=as_text(metadata.get("name")),
            labels=text_map(metadata.get("labels")),
            annotations=text_map(metadata.get("annotations")),
            unschedulable=as_map(item.get("spec")).get("unschedulable") is True,
            allocatable=text_map(as_map(item.get("status")).get("allocatable")),
        )
