"""Which device families a cluster's nodes show, and which of them `check` looks at."""

from __future__ import annotations

from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.vendors.families import NVIDIA, families
from hami_dra_webhook.core.vendors.profile import Family


def family_nodes(nodes: list[JsonObject], policy: Policy) -> dict[str, list[str]]:
    """Family key -> the nodes that show its devices (legacy resources offered, or a label)."""
    found: dict[str, set[str]] = {}
    # Node labels that say a family's cards are there, besides the legacy resources offered.
    labelled = [(f.key, f.node_label) for f in families(policy).all if f.node_label is not None]
    for node in nodes:
        metadata = node.get("metadata") or {}
        name, labels = str(metadata.get("name")), metadata.get("labels") or {}
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        for resource, amount in allocatable.items():
            family = families(policy).of(resource)
            if family is not None and family.key != NVIDIA and str(amount) not in ("0", ""):
                found.setdefault(family.key, set()).add(name)
        for key, (label, value) in labelled:
            if labels.get(label) == value:
                found.setdefault(key, set()).add(name)
    return {key: sorted(names) for key, names in found.items()}


def families_to_check(nodes: list[JsonObject], policy: Policy) -> list[tuple[Family, list[str]]]:
    present = family_nodes(nodes, policy)
    return [
        (family, present.get(family.key, []))
        for family in families(policy).all
        if family.key != NVIDIA and (family.converted or family.key in present)
    ]
