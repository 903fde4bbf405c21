"""A container with legacy keys while its pod is translated (`GpuContainer`): its family's plan
and the container itself."""

from __future__ import annotations

from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.vendors.profile import Resolved


class GpuContainer:
    """A container with legacy keys while it is translated: its plan, and the container itself
    (which the plan, kept in the decision and the cache, does not hold). The plan's fields are
    read through plain attributes (properties cost on this path)."""

    __slots__ = (
        "container",
        "is_gpu",
        "plan",
        "record",
        "ref",
        "request",
        "runtime_class",
        "share",
    )

    def __init__(self, resolved: Resolved, container: JsonObject) -> None:
        plan, self.record, self.runtime_class = resolved
        self.plan = plan
        self.container = container
        self.ref, self.request, self.share = plan.ref, plan.request, plan.share
        # A GPU container in legacy's eyes: it names a count, or gets a device.
        self.is_gpu = plan.request.count is not None or plan.gets_devices
