"""Where workloads come from: manifest files, or a live cluster (through the API Protocol)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hami_dra_webhook.core.types import JsonObject
from hami_dra_webhook.files.manifests import Manifest, pod_template
from hami_dra_webhook.kube.port import WORKLOAD_PATHS, KubeApi

# A controller's pods are reported with their controller, not on their own.
OWNED_BY = {"ReplicaSet": "Deployment", "Job": "CronJob"}


@dataclass(frozen=True)
class Workload:
    kind: str
    namespace: str
    name: str
    pod: JsonObject
    source: str


def _workload(document: JsonObject, default_namespace: str, source: str) -> Workload | None:
    template = pod_template(document)
    if template is None:
        return None
    metadata = document.get("metadata") or {}
    return Workload(
        kind=str(document["kind"]),
        namespace=str(metadata.get("namespace") or default_namespace),
        name=str(metadata.get("name") or metadata.get("generateName") or "<no name>"),
        pod=template[1],
        source=source,
    )


def from_manifests(manifests: list[Manifest], default_namespace: str) -> list[Workload]:
    found = (_workload(m.document, default_namespace, m.source) for m in manifests)
    return [workload for workload in found if workload is not None]


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
            workload = _workload({**item, "kind": kind}, "", "cluster")
            if workload is not None:
                found.append(workload)
    return found
