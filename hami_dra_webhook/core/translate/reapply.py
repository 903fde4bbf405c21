"""Pod UPDATE: strip legacy GPU keys that a re-apply of the original manifest puts back."""

from __future__ import annotations

from typing import Any

from hami_dra_webhook.core.legacy.request import resource_maps
from hami_dra_webhook.core.model import patch
from hami_dra_webhook.core.model.containers import containers
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.vendors.families import converted_names


def strip_reapplied(new: Any, old: Any, policy: Policy) -> list[patch.PatchOp]:
    """Ops that remove legacy keys present in `new` but absent from the same container in `old`.

    `kubectl apply` of the original manifest sends the legacy resources again; container
    resources are immutable, so without this the API server would refuse the update. Nothing
    else is touched.
    """
    spec, old_spec = _spec(new), _spec(old)
    names = converted_names(policy)  # every converted family's, not only NVIDIA's
    ops: list[patch.PatchOp] = []
    before = {
        (ref.list_name, _name(c)): c for ref, c in containers(old_spec) if isinstance(c, dict)
    }
    for ref, container in containers(spec):
        if not isinstance(container, dict):
            continue
        old_limits, old_requests = resource_maps(before.get((ref.list_name, _name(container)), {}))
        limits, requests = resource_maps(container)
        for map_name, values, old_values in (
            ("limits", limits, old_limits),
            ("requests", requests, old_requests),
        ):
            extra = [k for k in names if k in values and k not in old_values]
            base = ("spec", ref.list_name, ref.position, "resources", map_name)
            if extra and len(extra) == len(values) and not old_values:
                ops.append(patch.remove(patch.pointer(*base)))
            else:
                ops += [patch.remove(patch.pointer(*base, key)) for key in extra]
    return ops


def _name(container: dict[str, Any]) -> str | None:
    name = container.get("name")
    return name if isinstance(name, str) else None


def _spec(pod: Any) -> dict[str, Any]:
    spec = pod.get("spec") if isinstance(pod, dict) else None
    return spec if isinstance(spec, dict) else {}
