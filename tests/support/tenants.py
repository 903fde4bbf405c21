"""A tenant as issue 34 played it: a ServiceAccount bound to the built-in `edit` ClusterRole in
its own namespace only, and the objects it writes under the webhook's labels to hurt the
webhook (templates whose spec or annotations are as large as kube-apiserver accepts, and whose
`&` characters kube-apiserver serves six times larger, as `\\u0026`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hami_dra_webhook.core.translate.claims import template_labels
from hami_dra_webhook.kube.client import KubernetesApi
from tests.support.cluster import Cluster, api_for
from tests.support.loop import run

SELECTOR_BYTES = 10_000  # below kube-apiserver's 10 KiB bound on one CEL expression


def tenant_kubeconfig(cluster: Cluster, namespace: str, name: str = "tenant") -> Path:
    """A kubeconfig of ServiceAccount `name`, with `edit` in `namespace` and nothing else."""
    cluster.kubectl("create", "serviceaccount", name, "-n", namespace)
    cluster.kubectl(
        "create",
        "rolebinding",
        f"{name}-edit",
        "--clusterrole=edit",
        f"--serviceaccount={namespace}:{name}",
        "-n",
        namespace,
    )
    return cluster.service_account_kubeconfig(namespace, name)


def squatting_template(
    name: str, *, spec_bytes: int = 0, annotation_bytes: int = 0, tag: str = ""
) -> dict[str, Any]:
    """A template under the webhook's labels, with about `spec_bytes` of `&` in CEL selectors
    (each request at most 32 selectors) and `annotation_bytes` of `&` in one annotation."""
    selectors_needed = max(1, -(-spec_bytes // SELECTOR_BYTES)) if spec_bytes else 1
    literal = "&" * (SELECTOR_BYTES - 40) if spec_bytes else ""
    selector = {"cel": {"expression": f'device.driver != "{literal}"'}}
    requests = []
    for index in range(-(-selectors_needed // 32)):
        count = min(32, selectors_needed - 32 * index)
        requests.append(
            {
                "name": f"r{index}",
                "exactly": {
                    "deviceClassName": "hami-core-gpu.project-hami.io",
                    "selectors": [selector] * count,
                },
            }
        )
    annotations = {"hami.io/legacy-request": "nvidia.com/gpu=1"}
    if annotation_bytes:
        annotations["tenant.example/padding"] = "&" * annotation_bytes
    if tag:
        annotations["tenant.example/tag"] = tag
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "labels": template_labels(), "annotations": annotations},
        "spec": {"spec": {"devices": {"requests": requests}}},
    }


def create_as(cluster: Cluster, kubeconfig: Path, namespace: str, manifest: dict[str, Any]) -> None:
    """Create `manifest` as the kubeconfig's user, through this project's API adapter: kubectl
    (Go's encoding/json) would send each `&` as `\u0026`, past kube-apiserver's 3 MiB bound on
    a request body, where the attack's client sent it as one byte."""
    api = api_for(kubeconfig)
    try:
        run(create_with(api, namespace, manifest))
    finally:
        run(api.close())


async def create_with(api: KubernetesApi, namespace: str, manifest: dict[str, Any]) -> None:
    """`create_as` on an event loop that is running (the adapter is the tenant's)."""
    body = {**manifest, "metadata": {**manifest["metadata"], "namespace": namespace}}
    await api.create_template(namespace, body, dry_run=False, timeout=60)


def touch_as(cluster: Cluster, kubeconfig: Path, namespace: str, name: str, value: str) -> None:
    cluster.kubectl(
        "annotate",
        "--overwrite",
        "-n",
        namespace,
        "resourceclaimtemplate",
        name,
        f"tenant.example/touched={value}",
        kubeconfig=kubeconfig,
    )
