"""The admission use case: one AdmissionReview request in, the AdmissionReview answer out."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from hami_dra_webhook.cluster import ClusterState
from hami_dra_webhook.core import admission
from hami_dra_webhook.core.policy import Policy
from hami_dra_webhook.core.reapply import strip_reapplied
from hami_dra_webhook.core.translate import translate_pod
from hami_dra_webhook.core.types import JsonObject
from hami_dra_webhook.templates import TemplateStore, TemplateUnavailable

CAPACITY_HELP = (
    "kube-apiserver drops DRA consumable capacity here, so this shared GPU request would get"
    " whole GPUs; enable the DRAConsumableCapacity feature gate (default on from 1.36)"
)


@dataclass
class Admission:
    """The answer plus what the shell logs and counts."""

    body: dict[str, Any]
    operation: str
    outcome: str  # converted | unchanged | refused | error
    namespace: str = ""
    name: str = ""
    templates: list[str] = field(default_factory=list)
    resources: list[str] = field(default_factory=list)


@dataclass
class Admitter:
    policy: Policy
    store: TemplateStore
    cluster: ClusterState | None = None
    budget: float = 5.0
    _with_sizes: dict[tuple[int, ...], Policy] = field(default_factory=dict, repr=False)

    async def admit(self, review: admission.AdmissionReview) -> Admission:
        request = review.request
        pod = request.object or {}
        metadata = pod.get("metadata") if isinstance(pod.get("metadata"), dict) else {}
        result = Admission(
            body={},
            operation=request.operation,
            outcome="unchanged",
            namespace=request.namespace or "",
            name=request.name or str((metadata or {}).get("generateName") or ""),
        )
        if not request.is_pod or request.operation not in ("CREATE", "UPDATE"):
            result.body = admission.response(request.uid, allowed=True)
        elif request.operation == "UPDATE":
            ops = strip_reapplied(pod, request.old_object, self.policy)
            warnings = []
            if ops:
                warnings.append("legacy GPU resources re-applied to a converted pod were dropped")
            result.body = admission.response(request.uid, allowed=True, ops=ops, warnings=warnings)
        else:
            await self._create(request, pod, result)
        return result

    async def _create(
        self, request: admission.AdmissionRequest, pod: JsonObject, result: Admission
    ) -> None:
        metadata = pod.get("metadata")
        declared = metadata.get("namespace") if isinstance(metadata, dict) else None
        namespace = (
            request.namespace or (declared if isinstance(declared, str) else "") or "default"
        )
        translation = translate_pod(pod, self._effective_policy(), namespace)
        result.outcome = translation.outcome
        uid = request.uid
        warnings = list(translation.warnings)
        if translation.outcome == "refused":
            result.body = admission.response(
                uid,
                allowed=False,
                code=translation.code,
                message=translation.message,
                warnings=warnings,
                audit={"outcome": "refused"},
            )
            return
        if translation.outcome == "unchanged":
            result.body = admission.response(uid, allowed=True, warnings=warnings)
            return
        result.resources = translation.resources
        warnings += self._cluster_warnings(result.resources)
        names = [t["metadata"]["name"] for t in translation.templates]
        result.templates = names
        cores_key = self.policy.webhook.capacity_keys.cores
        if self._capacity_dropped() and _shares_a_gpu(translation.templates, cores_key):
            if not self.policy.webhook.allow_sharing_without_capacity:
                result.outcome = "refused"
                result.body = admission.response(
                    uid, allowed=False, code=422, message=CAPACITY_HELP, warnings=warnings
                )
                return
            warnings.append("consumable capacity is off: this pod may get whole GPUs")
        deadline = time.monotonic() + self.budget
        try:
            warnings += await self.store.ensure(
                namespace, translation.templates, dry_run=request.dry_run, deadline=deadline
            )
        except TemplateUnavailable as error:
            result.outcome = "refused"
            result.body = admission.response(
                uid, allowed=False, code=error.code, message=error.message, warnings=warnings
            )
            return
        audit = {"outcome": "converted", "templates": ",".join(names) or "none"}
        result.body = admission.response(
            uid, allowed=True, ops=translation.patch, warnings=warnings, audit=audit
        )

    def _effective_policy(self) -> Policy:
        """The policy, with the GPU memory sizes the cluster's ResourceSlices publish when a
        cluster is reachable (configured sizes are the fallback)."""
        sizes = self.cluster.memory_sizes if self.cluster is not None else ()
        if not sizes or sizes == self.policy.webhook.device_memory_sizes:
            return self.policy
        cached = self._with_sizes.get(sizes)
        if cached is None:
            webhook = self.policy.webhook.model_copy(update={"device_memory_sizes": sizes})
            cached = Policy(nvidia=self.policy.nvidia, webhook=webhook)
            self._with_sizes = {sizes: cached}  # only the current sizes are kept
        return cached

    def _capacity_dropped(self) -> bool:
        return self.cluster is not None and self.cluster.capacity == "dropped"

    def _cluster_warnings(self, resources: list[str]) -> list[str]:
        if self.cluster is None:
            return []
        return [
            f"DeviceClass {self.cluster.extended_resources[r]} also claims {r}"
            " (extendedResourceName); legacy requests may get whole GPUs from it"
            for r in resources
            if r in self.cluster.extended_resources
        ]


def _shares_a_gpu(templates: list[JsonObject], cores_key: str) -> bool:
    """True when some request asks for less than a whole device (needs consumable capacity)."""
    for template in templates:
        for request in template["spec"]["spec"]["devices"]["requests"]:
            for exact in (
                [request["exactly"]] if "exactly" in request else request["firstAvailable"]
            ):
                capacity = exact.get("capacity", {}).get("requests", {})
                if any(key != cores_key or value != "100" for key, value in capacity.items()):
                    return True
    return False
