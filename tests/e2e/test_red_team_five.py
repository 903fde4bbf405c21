"""Issue 61 (red team, round five) through the real kube-apiserver, with the chart installed and
its webhook running: each finding as a tenant did it, now held.

The GPU node is the control plane's stand-in (two 24 GiB cards and an 80 GiB one; no kubelet):
kube-scheduler binds pods and allocates their claims, nothing runs. What the pass does in
between a tenant's read and write is tests/cluster/test_quota_pass_tenants.py (in process, on a
real kube-apiserver too); the driver found by what only the chart's can be is
tests/cluster/test_move_canary.py and tests/migrate/test_check.py.
"""

from __future__ import annotations

import io
import json
import time
from typing import Any

import pytest

from hami_dra_webhook.cli.main import main
from tests.e2e.test_gpu_quotas import _gated, _quota, _settled
from tests.e2e.test_red_team_four import _pod_with_claim, migrate
from tests.support.cluster import Cluster, Release, wait_for
from tests.support.pods import gpu_pod

pytestmark = pytest.mark.e2e_on(capacity=True, versions=("1.37",))
DRIVER = "hami-core-gpu.project-hami.io"
MEM, R_MEM = "limits.nvidia.com/gpumem", "requests.nvidia.com/gpumem"
SMALL = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000}
NOWHERE = {"e2e.hami.io/nowhere": "yes"}  # released, never scheduled: the window a tenant uses


def _claim(name: str, **exact: Any) -> dict[str, Any]:
    request = {"name": "gpu", "exactly": {"deviceClassName": DRIVER, **exact}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [request]}},
    }


def _told(cluster: Cluster, namespace: str, pod: str, words: str) -> str:
    def found() -> str | None:
        events = cluster.get(
            "events", "-n", namespace, f"--field-selector=involvedObject.name={pod}"
        )["items"]
        said = [e["message"] for e in events if words in e["message"]]
        return said[0] if said else None

    # (An earlier Event may say less: a pass before the webhook's first read of the card sizes.)
    return wait_for(found, f"an Event on {namespace}/{pod} saying {words!r}", timeout=60)


def test_an_absurd_count_stalls_no_other_namespace(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    """Outage finding: a claim asking `count` 10^12 made the pass raise MemoryError over and
    over (another namespace's fitting pod stayed held) and `migrate status` exit with it. Now
    it is charged what a claim can hold (32 devices): its pod is held, the other namespace's
    pod is released, `migrate status` answers."""
    other = cluster.create_namespace("other")
    try:
        _quota(cluster, namespace, {MEM: "8000"})
        _quota(cluster, other, {MEM: "8000"})
        cluster.apply(_claim("absurd", count=10**12), namespace=namespace)
        cluster.apply(_pod_with_claim("greedy", "absurd"), namespace=namespace)
        started = time.monotonic()
        cluster.apply(gpu_pod("fits", SMALL), namespace=other)
        _settled(cluster, other, 1, 1)
        print(f"the other namespace's pod released within {time.monotonic() - started:.1f}s")
        _told(cluster, namespace, "greedy", f"requested: {MEM}={32 * 81920}")
        code, out, err = migrate(cluster, "status", "-o", "json")
        assert code == 0, err
        assert namespace in out
        assert hami.webhook is not None and "MemoryError" not in hami.webhook.log()
    finally:
        cluster.release_namespace(other)
        # The tenant's own claim outlives its pod: deleted with it, for the namespace's end.
        cluster.kubectl("delete", "pod", "greedy", "-n", namespace, "--grace-period=0", "--force")
        cluster.kubectl("delete", "resourceclaim", "absurd", "-n", namespace)


def test_all_and_the_implicit_extended_resource_are_held_and_charged(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    """Bypass findings: a claim with `allocationMode: All` was charged one device and then
    given every card of the node; a pod asking the DeviceClass's implicit extended resource
    was created without the gate. Both are held now, charged every card they can take."""
    _quota(cluster, namespace, {MEM: "90000"})
    cluster.apply(_claim("everything", allocationMode="All"), namespace=namespace)
    cluster.apply(_pod_with_claim("all", "everything"), namespace=namespace)
    implicit = gpu_pod("implicit", {f"deviceclass.resource.kubernetes.io/{DRIVER}": 2})
    cluster.apply(implicit, namespace=namespace)
    assert _gated(cluster.pod(namespace, "implicit"))  # held from its creation
    said = _told(cluster, namespace, "all", "exceeded quota")
    assert f"requested: {MEM}={3 * 81920}" in said, (
        said
    )  # the node's three cards, the largest's size
    said = _told(cluster, namespace, "implicit", "exceeded quota")
    assert f"requested: {MEM}={2 * 81920}" in said, said
    cluster.apply(gpu_pod("fits", SMALL), namespace=namespace)
    _settled(cluster, namespace, 1, 3)
    cluster.kubectl("delete", "pod", "all", "-n", namespace, "--grace-period=0", "--force")
    cluster.kubectl("delete", "resourceclaim", "everything", "-n", namespace)


def test_a_released_pods_claim_cannot_be_made_again_larger(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    """Bypass finding: a released pod's own claim deleted and made again asking 20 GiB before
    the pod was scheduled (2000 MiB allowed). The new claim is refused, and so is the one
    kube-controller-manager would make again from a template the tenant replaced."""
    _quota(cluster, namespace, {MEM: "2000"})
    small = {"capacity": {"requests": {"memory": "1000Mi", "cores": "10"}}}
    cluster.apply(_claim("mine", **small), namespace=namespace)
    named = _pod_with_claim("named", "mine")
    named["spec"]["nodeSelector"] = NOWHERE
    cluster.apply(named, namespace=namespace)
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "tenant-template"},
        "spec": {"spec": _claim("x", **small)["spec"]},
    }
    cluster.apply(template, namespace=namespace)
    templated = gpu_pod("templated", {}, nodeSelector=NOWHERE)
    templated["spec"]["resourceClaims"] = [
        {"name": "gpu", "resourceClaimTemplateName": "tenant-template"}
    ]
    templated["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    cluster.apply(templated, namespace=namespace)
    _settled(cluster, namespace, 2, 2)

    cluster.kubectl("delete", "resourceclaim", "mine", "-n", namespace)
    larger = _claim("mine", capacity={"requests": {"memory": "20Gi", "cores": "10"}})
    refused = cluster.kubectl(
        "create", "-n", namespace, "-f", "-", stdin=json.dumps(larger), check=False
    )
    assert refused.returncode != 0, refused.stdout
    assert f"pod {namespace}/named was released by its namespace's GPU quota" in refused.stderr

    # The claim made from the template, deleted and made again under its name, with the pod as
    # its owner (kube-controller-manager and kube-scheduler take it as the pod's), asking more.
    pod = cluster.pod(namespace, "templated")
    made = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    cluster.kubectl("delete", "resourceclaim", made, "-n", namespace)
    again = {**larger, "metadata": {"name": made}}
    again["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Pod", "name": "templated", "uid": pod["metadata"]["uid"]}
        | {"controller": True}
    ]
    refused = cluster.kubectl(
        "create", "-n", namespace, "-f", "-", stdin=json.dumps(again), check=False
    )
    assert refused.returncode != 0, refused.stdout
    assert f"pod {namespace}/templated was released by its namespace's GPU quota" in (
        refused.stderr
    )
    cluster.kubectl("delete", "pods", "--all", "-n", namespace, "--grace-period=0", "--force")
    cluster.kubectl("delete", "resourceclaim", "mine", "-n", namespace, "--ignore-not-found")


def test_a_sidecar_is_counted_as_kube_apiserver_counts_it(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    """Bypass finding: an opted-out pod with a GPU sidecar was counted 4000 by the pass and
    8000 by kube-apiserver, and a converted pod was released over `requests.nvidia.com/gpumem:
    8000`. Both count 8000 now, and the converted pod is held."""
    _quota(cluster, namespace, {R_MEM: "8000"})
    half = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 4000}
    opted = gpu_pod("opted-out", half)
    opted["metadata"]["labels"] = {"hami.io/webhook": "ignore"}
    sidecar = {
        "name": "sidecar",
        "image": opted["spec"]["containers"][0]["image"],
        "restartPolicy": "Always",
        "resources": {"limits": half},
    }
    opted["spec"]["initContainers"] = [sidecar]
    cluster.apply(opted, namespace=namespace)
    _settled(cluster, namespace, 1, 1)
    used = cluster.get("resourcequota", "gpu", "-n", namespace)["status"]["used"][R_MEM]
    assert used in ("8k", "8000"), used  # kube-apiserver's own count
    cluster.apply(gpu_pod("converted", SMALL), namespace=namespace)
    _told(cluster, namespace, "converted", f"requested: {R_MEM}=1000, used: {R_MEM}=8000")
    assert _gated(cluster.pod(namespace, "converted"))


LABEL = [{"op": "add", "path": "/metadata/labels", "value": {"owned": "yes"}}]


def _as(cluster: Cluster, account: str, namespace: str, name: str, ops: Any) -> tuple[int, Any]:
    """A JSON patch of a pod as `account` (impersonated: its RBAC, then the admission
    policies), straight to kube-apiserver (kubectl would GET first, which it may not)."""
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    headers = {"Content-Type": "application/json-patch+json", "Impersonate-User": account}
    return cluster.plane.request("PATCH", path, ops, **headers)


def test_the_webhook_may_only_remove_its_gate(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    """Privilege finding: the webhook's ServiceAccount could patch any pod (image, labels,
    kube-system's included). Now kube-apiserver lets it remove the gate of a held pod, and
    nothing else."""
    account = f"system:serviceaccount:{hami.namespace}:{hami.fullname}"
    plain = gpu_pod("plain", {}, nodeSelector=NOWHERE)
    cluster.apply(plain, namespace=namespace)
    system = gpu_pod(f"probe-{namespace}", {}, nodeSelector=NOWHERE)
    cluster.apply(system, namespace="kube-system")
    try:
        for where, name in ((namespace, "plain"), ("kube-system", f"probe-{namespace}")):
            code, said = _as(cluster, account, where, name, LABEL)
            assert code == 403 and "may only remove the scheduling gate" in str(said), said
        _quota(cluster, namespace, {MEM: "1000"})
        cluster.apply(gpu_pod("first", SMALL), namespace=namespace)
        cluster.apply(gpu_pod("held", SMALL), namespace=namespace)
        _settled(cluster, namespace, 2, 3)  # "plain" asks no GPU: never held
        image = [{"op": "replace", "path": "/spec/containers/0/image", "value": "evil:latest"}]
        code, said = _as(cluster, account, namespace, "held", image)
        assert code == 403 and "may only remove the scheduling gate" in str(said), said
    finally:
        cluster.kubectl(
            "delete", "pod", f"probe-{namespace}", "-n", "kube-system", "--grace-period=0",
            "--force",
        )  # fmt: skip


def test_version_trusts_only_the_charts_objects(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    """A tenant's Deployment labelled as the chart's webhook, its image written with terminal
    escape codes: `version --cluster` lists the chart's own webhook only (what it prints of
    the cluster goes through cli/terminal.py: tests/migrate/test_round_five.py)."""
    labels = {
        "app": "fake",
        "app.kubernetes.io/part-of": "hami-dra-webhook",
        "app.kubernetes.io/component": "webhook",
    }
    fake = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "hami-dra-webhook", "labels": labels},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "fake"}},
            "template": {
                "metadata": {"labels": {"app": "fake"}},
                "spec": {"containers": [{"name": "c", "image": "evil\x1b[2J:latest"}]},
            },
        },
    }
    cluster.apply(fake, namespace=namespace)
    out, err = io.StringIO(), io.StringIO()
    kubeconfig = str(cluster.plane.admin_kubeconfig)
    code = main(["version", "--cluster", "--kubeconfig", kubeconfig], stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    assert namespace not in out.getvalue() and "\x1b" not in out.getvalue(), out.getvalue()
    assert f"in {hami.namespace}/{hami.fullname} (" in out.getvalue()
