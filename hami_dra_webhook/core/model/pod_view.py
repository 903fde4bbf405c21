"""A Pod as the quota pass and the moves read it (who it is, whether it ended, is held or is
Ready, which ResourceClaims it uses, what its containers' states say): a typed view whose
fields are taken only in the shape Kubernetes gives them (core/model/shapes.py), each read when
asked. The quota pass reads every pod of a namespace, so nothing is parsed ahead (a view that
parsed everything cost the 10,000-pod pass of benchmarks/quota_pass.py 0.8 s -> 1.1 s). What
its containers ask stays the translation's and the quota charge's, which read the containers
themselves. (core/translate/pod_view.py is another thing: the part of a pod the translation
reads, its cache key.)"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hami_dra_webhook.core.model.shapes import as_list, as_map, as_text, text_map

ENDED = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class PodView:
    metadata: dict[str, Any]
    spec: dict[str, Any]
    status: dict[str, Any]

    @classmethod
    def of(cls, pod: object) -> PodView:
        item = as_map(pod)
        return cls(
            as_map(item.get("metadata")), as_map(item.get("spec")), as_map(item.get("status"))
        )

    @property
    def name(self) -> str:
        return as_text(self.metadata.get("name"))

    @property
    def namespace(self) -> str:
        return as_text(self.metadata.get("namespace"))

    @property
    def deleting(self) -> bool:
        """It has a deletionTimestamp: going away."""
        return bool(self.metadata.get("deletionTimestamp"))

    @property
    def uid(self) -> str:
        return as_text(self.metadata.get("uid"))

    @property
    def resource_version(self) -> str:
        return as_text(self.metadata.get("resourceVersion"))

    @property
    def created(self) -> str:
        """creationTimestamp, as the API wrote it (its text sorts as its time)."""
        return as_text(self.metadata.get("creationTimestamp"))

    @property
    def labels(self) -> dict[str, str]:
        return text_map(self.metadata.get("labels"))

    @property
    def phase(self) -> str:
        return as_text(self.status.get("phase"))

    @property
    def ended(self) -> bool:
        return self.phase in ENDED

    def condition(self, kind: str) -> dict[str, Any]:
        """status.conditions' entry of type `kind` ({} where there is none)."""
        for entry in as_list(self.status.get("conditions")):
            if isinstance(entry, dict) and entry.get("type") == kind:
                return entry
        return {}

    @property
    def ready(self) -> bool:
        """The Ready condition is True (the kubelet's word, from the readiness probes)."""
        return self.condition("Ready").get("status") == "True"

    def container_states(self, state: str) -> list[dict[str, Any]]:
        """Each container's current state of kind `state` ("waiting", "terminated",
        "running"), in containerStatuses' order; those in another state left out."""
        found = []
        for entry in as_list(self.status.get("containerStatuses")):
            current = as_map(as_map(entry).get("state")).get(state)
            if isinstance(current, dict):
                found.append(current)
        return found

    def gate_index(self, gate: str) -> int | None:
        """Where `gate` sits in spec.schedulingGates (entries of other shapes keep their
        places: a JSON patch removes it by this index), if it does."""
        for index, entry in enumerate(as_list(self.spec.get("schedulingGates"))):
            if isinstance(entry, dict) and entry.get("name") == gate:
                return index
        return None

    @property
    def scheduler_claim(self) -> str:
        """The claim kube-scheduler made for the pod's extended resources (KEP-5004), or ""."""
        extended = self.status.get("extendedResourceClaimStatus")
        return as_text(extended.get("resourceClaimName")) if isinstance(extended, dict) else ""

    def named_claims(self) -> list[str]:
        """The claims spec.resourceClaims names (resourceClaimName)."""
        return [
            name
            for entry in as_list(self.spec.get("resourceClaims"))
            if isinstance(entry, dict) and (name := as_text(entry.get("resourceClaimName")))
        ]

    def claim_names(self) -> tuple[list[str], bool]:
        """The claims the pod uses (named, made from its templates, made by kube-scheduler),
        and whether one from a template has no claim made yet (an entry made with no claim
        needs none)."""
        made = {
            as_text(s.get("name")): as_text(s.get("resourceClaimName"))
            for s in as_list(self.status.get("resourceClaimStatuses"))
            if isinstance(s, dict)
        }
        names, missing = [], False
        for entry in as_list(self.spec.get("resourceClaims")):
            if not isinstance(entry, dict):
                continue
            if named := as_text(entry.get("resourceClaimName")):
                names.append(named)
            elif entry.get("resourceClaimTemplateName"):
                key = as_text(entry.get("name"))
                if made.get(key):
                    names.append(made[key])
                elif key not in made:
                    missing = True
        if extended := self.scheduler_claim:
            names.append(extended)
        return names, missing
