"""Where workloads come from: manifest files, or a live cluster (through the API Protocol)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hami_dra_webhook.api import WORKLOAD_PATHS, KubeApi
from hami_dra_webhook.core.types import JsonObject
from hami_dra_webhook.manifests import Manifest, pod_template

# A controller's pods are reported with their controller, not on their own.
OWNED_BY = {"ReplicaSet": "Deployment", "Job": "CronJob"}


@dataclass(frozen=True)
class Workload:
    kind: str
    namespace: str
    name: str
    pod: JsonObject
    source: str


def from_manifests(manifests: list[Manifest], default_namespace: str) -> list[Workload]:
    found = []
    for manifest in manifests:
        document = manifest.document
        template = pod_template(document)
        if template is None:
            continue
        metadata = document.get("metadata") or {}
        found.append(
            Workload(
                kind=str(document["kind"]),
                namespace=str(metadata.get("namespace") or default_namespace),
                name=str(metadata.get("name") or metadata.get("generateName") or "<no name>"),
                pod=template[1],
                source=manifest.source,
            )
        )
    return found


def _owned(item: JsonObject, kind: str) -> bool:
    owners = (item.get("metadata") or {}).get("ownerReferences") or []
    if kind == "Pod":
        return any(owner.get("controller") for owner in owners)
    return any(owner.get("kind") == OWNED_BY.get(kind) for owner in owners)


async def from_cluster(
    api: KubeApi, namespace: str | None, progress: Callable[[str], None], timeout: float = 30.0
) -> list[Workload]:
    found = []
    for kind in WORKLOAD_PATHS:
        progress(kind)
        for item in await api.list_workloads(kind, namespace, timeout=timeout):
            if _owned(item, kind):
                continue
            document = {**item, "kind": kind}
            template = pod_template(document)
            if template is None:
                continue
            metadata = item.get("metadata") or {}
            found.append(
                Workload(
                    kind,
                    str(metadata.get("namespace", "")),
                    str(metadata.get("name", "")),
                    template[1],
                    "cluster",
                )
            )
    return found
