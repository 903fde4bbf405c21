"""What a pod holds of each GPU pool, read from what the cluster allocated to it, never from a
label: a tenant can remove `hami.io/dra` from its own pod, and two kinds of pods that hold the
DRA driver's devices never carry it (a count-only pod given whole GPUs by kube-scheduler through
the DeviceClass's `extendedResourceName`, and a pod that uses a ResourceClaim of its own).

- The DRA side: the allocated ResourceClaims whose results name the driver and that the pod
  uses: those its spec names (`resourceClaimName`), those generated for it
  (`status.resourceClaimStatuses`, `status.extendedResourceClaimStatus`), and those reserved
  for it (`status.reservedFor`, by the pod's uid).
- The legacy side: a container that names a legacy resource of a converted family, unless
  kube-scheduler turned it into a claim (`extendedResourceClaimStatus`: then the claim holds
  the device), or HAMi's own record of where it placed the pod (`hami.io/vgpu-node`).

A claim is on a node when its allocation's node selector names the node, when a result's pool
is one of the node's pools (the driver publishes one pool per node), or when a pod it is
reserved for is bound there. No I/O here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from hami_dra_webhook.core.legacy.request import has_legacy_keys
from hami_dra_webhook.core.model.claim_view import ClaimView
from hami_dra_webhook.core.model.containers import containers
from hami_dra_webhook.core.model.pod_view import PodView
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.vendors.families import converted_names

# Written by hami-scheduler on the pods it placed (the node's name): HAMi's own quota counts
# exactly these pods (docs/quotas.md).
HAMI_NODE_ANNOTATION = "hami.io/vgpu-node"
ClaimKey = tuple[str, str]  # (namespace, name)


@dataclass
class ClaimIndex:
    """The allocated claims with results of the driver (their views: a thousand nodes' claims
    are many), by (namespace, name) and by the uid of each pod they are reserved for."""

    driver: str
    by_name: dict[ClaimKey, ClaimView] = field(default_factory=dict)
    by_pod_uid: dict[str, list[ClaimView]] = field(default_factory=dict)

    @classmethod
    def of(cls, claims: Iterable[JsonObject], driver: str) -> ClaimIndex:
        index = cls(driver)
        index.add(claims)
        return index

    def add(self, claims: Iterable[JsonObject]) -> None:
        """More claims (a list's page at a time: the whole list is never held)."""
        for whole in claims:
            claim = ClaimView.of(whole)
            if not claim.results_of(self.driver):
                continue
            self.by_name[claim.key] = claim
            for uid in claim.reserved_pod_uids:
                self.by_pod_uid.setdefault(uid, []).append(claim)

    def held_by(self, pod: JsonObject) -> list[ClaimView]:
        """The driver's allocated claims the pod uses, each once."""
        metadata = pod.get("metadata") or {}
        namespace = str(metadata.get("namespace", ""))
        found: dict[ClaimKey, ClaimView] = {}
        for name in PodView.of(pod).claim_names()[0]:  # named, made, kube-scheduler's
            claim = self.by_name.get((namespace, name))
            if claim is not None:
                found[(namespace, name)] = claim
        uid = metadata.get("uid")
        for claim in self.by_pod_uid.get(str(uid), []) if uid else []:
            found[claim.key] = claim
        return list(found.values())


def holds_legacy(pod: JsonObject, policy: Policy) -> bool:
    """Whether the legacy side (HAMi's device plugin) serves the pod's GPUs: a container names
    a legacy resource that kube-scheduler did not turn into a claim, or hami-scheduler placed
    it (its annotation names the node the pod is bound to)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    bound = (pod.get("spec") or {}).get("nodeName")
    if bound and isinstance(annotations, dict) and annotations.get(HAMI_NODE_ANNOTATION) == bound:
        return True
    if (pod.get("status") or {}).get("extendedResourceClaimStatus"):
        return False
    names = converted_names(policy)
    every = [c for _, c in containers(pod.get("spec") or {}) if isinstance(c, dict)]
    return any(has_legacy_keys(c, names) for c in every)


def node_pools(node: str, slice_pools: Iterable[str]) -> frozenset[str]:
    """The driver's pools of `node`: those its ResourceSlices name, and the node's own name
    (the pool a node-local driver publishes, still known after its slices are gone)."""
    return frozenset((node, *slice_pools))


def claim_on_node(
    claim: ClaimView, node: str, pools: frozenset[str], pod_nodes: Mapping[str, str], driver: str
) -> bool:
    """Whether the claim's allocation of `driver` is on `node`; `pod_nodes`: the node of each
    pod by uid, for the pods it is reserved for."""
    results = claim.results_of(driver)
    if not results:
        return False
    if any(result.pool in pools for result in results):
        return True
    if node in claim.node_names:
        return True
    return any(pod_nodes.get(uid) == node for uid in claim.reserved_pod_uids)
