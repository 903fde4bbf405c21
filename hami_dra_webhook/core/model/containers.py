"""The one walk over a pod's containers: init containers first, then app containers, each with
where it sits (`ContainerRef`: its list, its position, its name). Every module that looks at
containers walks them here, so that all agree on order and positions (a patch names them)."""

from __future__ import annotations

from typing import Any

from hami_dra_webhook.core.model.types import ContainerList, ContainerRef

CONTAINER_LISTS: tuple[ContainerList, ...] = ("initContainers", "containers")


def containers(spec: Any) -> list[tuple[ContainerRef, Any]]:
    """Every entry of the spec's container lists with its place; an entry that is not a map is
    kept (with the name "") for the caller to refuse or skip, a list that is not a list is
    none."""
    found: list[tuple[ContainerRef, Any]] = []
    if not isinstance(spec, dict):
        return found
    for list_name in CONTAINER_LISTS:
        items = spec.get(list_name)
        if not isinstance(items, list):
            continue
        for index, container in enumerate(items):
            name = container.get("name") if isinstance(container, dict) else None
            shown = name if isinstance(name, str) else ""
            found.append((ContainerRef(list_name, index, shown), container))
    return found
