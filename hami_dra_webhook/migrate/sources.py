"""Where workloads come from: manifest files, or a live cluster (through the API Protocol)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hami_dra_webhook.core.model.containers import containers
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.files.embedded import embedded_pods
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
    source: str  # file, file#N (its Nth document), or "cluster"
    # Where the pod template sits inside an object that is not a built-in workload (a custom
    # resource's `spec.tasks[0].template`); "" for built-in workloads.
    embedded_at: str = ""


def _identity(document: JsonObject, default_namespace: str) -> tuple[str, str, str]:
    metadata = document.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    return (
        str(document.get("kind")),
        str(metadata.get("namespace") or default_namespace),
        str(metadata.get("name") or metadata.get("generateName") or "<no name>"),
    )


def _workloads(
    document: Any,
    default_namespace: str,
    source: str,
    dra_schedulers: frozenset[str] = frozenset(),
) -> list[Workload]:
    """The built-in workload's pod template, or every pod template inside another object (as
    its pods are admitted: `dra_schedulers`, Volcano's when its Jobs are converted)."""
    if not isinstance(document, dict):
        return []
    kind, namespace, name = _identity(document, default_namespace)
    template = pod_template(document)
    if template is not None:
        return [Workload(kind, namespace, name, template[1], source)]
    return [
        Workload(kind, namespace, name, found.admitted, source, found.where)
        for found in embedded_pods(document, dra_schedulers)
    ]


def from_manifests(
    manifests: list[Manifest],
    default_namespace: str,
    dra_schedulers: frozenset[str] = frozenset(),
) -> list[Workload]:
    return [
        w
        for m in manifests
        for w in _workloads(m.document, default_namespace, m.where, dra_schedulers)
    ]


def _controller(item: JsonObject) -> JsonObject | None:
    owners = (item.get("metadata") or {}).get("ownerReferences") or []
    return next((o for o in owners if isinstance(o, dict) and o.get("controller")), None)


def _owned(item: JsonObject, kind: str) -> bool:
    """Reported with a controller scan lists (a ReplicaSet's Deployment, a Job's CronJob)."""
    if kind == "Pod":
        controller = _controller(item)
        return controller is not None and controller.get("kind") in WORKLOAD_PATHS
    owners = (item.get("metadata") or {}).get("ownerReferences") or []
    return any(owner.get("kind") == OWNED_BY.get(kind) for owner in owners)


def _pod_of_other_controller(pod: JsonObject, controller: JsonObject) -> Workload:
    """A pod whose controller is not a kind scan lists (a RayCluster, a LeaderWorkerSet, a
    Volcano Job: custom resources): reported under that controller, since its template is
    there; the pod stands for it."""
    metadata = pod.get("metadata") or {}
    return Workload(
        kind=str(controller.get("kind")),
        namespace=str(metadata.get("namespace") or ""),
        name=str(controller.get("name")),
        pod=pod,
        source="cluster",
        embedded_at=f"its pods (read from pod {metadata.get('name')})",
    )


def _signature(pod: JsonObject) -> str:
    """What tells two pods of one controller apart for a report: their containers' resources."""
    return repr(
        [
            (ref.name, container.get("resources"))
            for ref, container in containers(pod.get("spec"))
            if isinstance(container, dict)
        ]
    )


async def from_cluster(
    api: KubeApi,
    namespace: str | None,
    progress: Callable[[str], None],
    keep: Callable[[JsonObject], bool] = lambda pod: True,
    timeout: float = 30.0,
) -> list[Workload]:
    """The cluster's workloads whose pod template `keep` wants (scan keeps the ones that ask
    for legacy devices), read a page at a time: only what is kept outlives its page, so a
    cluster of 50,000 pods is never held at once."""
    found = []
    seen: set[tuple[str, str]] = set()  # (controller uid, pod signature)
    for kind in WORKLOAD_PATHS:
        progress(kind)
        version = WORKLOAD_PATHS[kind][0].removeprefix("/apis/").removeprefix("/api/")
        async for page in api.workload_pages(kind, namespace, timeout=timeout):
            for item in page:
                if _owned(item, kind):
                    continue
                controller = _controller(item) if kind == "Pod" else None
                if controller is not None:
                    if not keep(item):
                        continue
                    key = (str(controller.get("uid")), _signature(item))
                    if key not in seen:
                        seen.add(key)
                        found.append(_pod_of_other_controller(_lean(item), controller))
                    continue
                document = {**_lean(item), "kind": kind, "apiVersion": version}
                found += [w for w in _workloads(document, "", "cluster") if keep(w.pod)]
    return found


def _lean(pod: JsonObject) -> JsonObject:
    """An object as a report reads it: its status (often most of a pod's bytes) left out."""
    return {key: value for key, value in pod.items() if key != "status"}
