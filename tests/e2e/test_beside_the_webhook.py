"""Issue 65: the commands a user watches during a move and the webhook that admits the pods give
one answer, side by side on one real cluster (1.37, the chart installed, its webhook running as
the chart's pod would; the stand-in node publishes 24Gi and 80Gi cards). Legacy pods are made
while their namespace is out of the webhook's reach (`hami.io/webhook=ignore`), as on a cluster
before its move; then the namespace is the webhook's again, and

- `scan --cluster` says the StatefulSet's pod converts and `migrate status` that nothing keeps
  it from moving; re-created, the webhook converts it, one alternative per card size the
  cluster publishes, 25% of each (before, `migrate status` said it would be refused: "set
  hamiDraWebhook.deviceMemorySizes");
- the GPU quota's usage both commands print is the `used` in the webhook's own Warning when it
  holds that pod for the quota; once the quota is raised by the pod's `requested`, the webhook
  releases it and both commands count it in."""

from __future__ import annotations

import io
import json
import re
from typing import Any

import pytest

from hami_dra_webhook.cli.main import main
from hami_dra_webhook.core.quota.gpu_quota import GATE
from tests.support.cluster import Cluster, Release, wait_for
from tests.support.pods import gpu_pod

pytestmark = pytest.mark.e2e_on(versions=("1.37",))
MEM = "limits.nvidia.com/gpumem"
QUARTER = {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 25}


def _cli(cluster: Cluster, *args: str) -> Any:
    out, err = io.StringIO(), io.StringIO()
    kubeconfig = str(cluster.plane.admin_kubeconfig)
    code = main([*args, "-o", "json", "--kubeconfig", kubeconfig], stdout=out, stderr=err)
    assert code in (0, 1), (args, code, err.getvalue())
    return json.loads(out.getvalue())


def _stateful_set() -> dict[str, Any]:
    labels = {"app": "infer"}
    pod = gpu_pod("unused", QUARTER)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "infer"},
        "spec": {
            "replicas": 1,
            "serviceName": "infer",
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod["spec"]},
        },
    }


def _webhook_converts(cluster: Cluster, namespace: str) -> bool:
    """Whether a GPU pod created in `namespace` now is converted (asked with a server-side
    dry run, which calls the webhook and stores nothing)."""
    answer = cluster.apply(gpu_pod("probe", QUARTER), "--dry-run=server", "-o", "json",
                           namespace=namespace)  # fmt: skip
    limits = json.loads(answer)["spec"]["containers"][0]["resources"].get("limits", {})
    return "nvidia.com/gpu" not in limits


def _quota(cluster: Cluster, namespace: str, hard: int) -> None:
    body = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu"}}
    cluster.apply({**body, "spec": {"hard": {MEM: str(hard)}}}, namespace=namespace)


def _used(cluster: Cluster, namespace: str) -> tuple[int | None, int | None]:
    """The quota's used memory as `scan --cluster` and as `migrate status` print it."""
    scanned = _cli(cluster, "scan", "--cluster", "-n", namespace)
    (by_scan,) = [q["used"] for q in scanned["gpuQuotas"] if q["key"] == MEM]
    status = _cli(cluster, "migrate", "status")
    (by_status,) = [
        q["used"] for q in status["quotas"] if q["namespace"] == namespace and q["key"] == MEM
    ]
    return by_scan, by_status


def _held_for(cluster: Cluster, namespace: str, pod: str) -> str | None:
    events = cluster.get("events", "-n", namespace, f"--field-selector=involvedObject.name={pod}")
    said = [
        e["message"]
        for e in events["items"]
        if e["reason"] == "GPUQuotaExceeded" and "exceeded quota" in e["message"]
    ]
    return said[-1] if said else None


def _alternatives(cluster: Cluster, namespace: str, pod: dict[str, Any]) -> list[tuple[str, str]]:
    """(name, memory) of each alternative of the pod's claim template."""
    (claim,) = pod["spec"]["resourceClaims"]
    template = cluster.get(
        "resourceclaimtemplate", "-n", namespace, claim["resourceClaimTemplateName"]
    )
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    return [
        (sub["name"], sub["capacity"]["requests"]["memory"]) for sub in request["firstAvailable"]
    ]


def test_scan_and_migrate_status_say_what_the_running_webhook_does(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    cluster.kubectl("label", "namespace", namespace, "hami.io/webhook=ignore")
    wait_for(lambda: not _webhook_converts(cluster, namespace), "the webhook leaves the namespace")
    cluster.apply(gpu_pod("bare", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000}),
                  namespace=namespace)  # fmt: skip
    cluster.apply(_stateful_set(), namespace=namespace)
    wait_for(lambda: cluster.exists("pod", "-n", namespace, "infer-0"), "the legacy pod")
    cluster.kubectl("label", "namespace", namespace, "hami.io/webhook-")
    wait_for(lambda: _webhook_converts(cluster, namespace), "the webhook takes the namespace")
    _quota(cluster, namespace, 3000)  # the bare pod's charge: nothing more fits

    scanned = _cli(cluster, "scan", "--cluster", "-n", namespace)
    (infer,) = [w for w in scanned["workloads"] if w["kind"] == "StatefulSet"]
    assert infer["outcome"] == "converted", infer
    status = _cli(cluster, "migrate", "status")
    (legacy,) = [p for p in status["namespaces"][namespace]["legacyPods"] if p["pod"] == "infer-0"]
    assert legacy["blocker"] == "", legacy

    # Re-created (as a move's eviction does), the webhook converts it as they said ...
    cluster.kubectl("delete", "pod", "-n", namespace, "infer-0", "--grace-period=0", "--force")
    converted = wait_for(
        lambda: next(
            (p for p in cluster.pods(namespace, "app=infer") if p["spec"].get("resourceClaims")),
            None,
        ),
        "the re-created pod, converted",
    )
    assert _alternatives(cluster, namespace, converted) == [
        ("mem-80gi", "20Gi"),
        ("mem-24gi", "6Gi"),
    ]  # the largest card first, as the webhook orders them
    # ... and holds it for the quota with the usage they print.
    message = wait_for(lambda: _held_for(cluster, namespace, "infer-0"), "the webhook's Warning")
    found = re.search(rf"requested: {MEM}=(\d+), used: {MEM}=(\d+)", message)
    assert found, message
    requested, used = int(found[1]), int(found[2])
    assert _used(cluster, namespace) == (used, used) == (3000, 3000), message

    _quota(cluster, namespace, 3000 + requested)  # room for exactly that pod
    wait_for(
        lambda: not any(
            g.get("name") == GATE for g in cluster.pod(namespace, "infer-0")["spec"].get(
                "schedulingGates") or []
        ),
        "the webhook releases the pod",
    )  # fmt: skip
    assert _used(cluster, namespace) == (3000 + requested, 3000 + requested)
