"""Operations against the real cluster: garbage collection, the `check` preflight, and a
webhook that is down."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from tests.support.cluster import RELEASE_NAMESPACE, Cluster, Release, wait_for
from tests.support.pods import gpu_pod, plain_pod


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hami_dra_webhook", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_gc_removes_unused_templates_and_keeps_used_ones(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    pods = [gpu_pod("kept", {"nvidia.com/gpu": 1}), gpu_pod("gone", {"nvidia.com/gpu": 2})]
    cluster.apply({"apiVersion": "v1", "kind": "List", "items": pods}, namespace=namespace)
    used = cluster.pod(namespace, "kept")["spec"]["resourceClaims"][0]["resourceClaimTemplateName"]
    unused = cluster.pod(namespace, "gone")["spec"]["resourceClaims"][0][
        "resourceClaimTemplateName"
    ]
    cluster.kubectl("delete", "pod", "gone", "-n", namespace, "--grace-period=0", "--force")
    time.sleep(1.1)  # last-used stamps have whole seconds; the grace below is one second
    # As the webhook's own ServiceAccount: GC needs nothing beyond the chart's RBAC.
    result = _cli("gc", "--kubeconfig", str(hami.kubeconfig), "--grace", "1")
    assert result.returncode == 0, result.stderr
    assert f"{namespace}/{unused}" in result.stdout
    remaining = [
        t["metadata"]["name"]
        for t in cluster.get("resourceclaimtemplates", "-n", namespace)["items"]
    ]
    assert remaining == [used]


def _check(cluster: Cluster) -> dict[str, tuple[str, str]]:
    result = _cli("check", "--kubeconfig", str(cluster.plane.admin_kubeconfig), "-o", "json")
    report = json.loads(result.stdout)
    assert result.returncode == {"PASS": 0, "WARN": 1, "FAIL": 2}[report["worst"]]
    return {line["check"]: (line["level"], line["detail"]) for line in report["checks"]}


def test_check_says_what_is_true_of_the_cluster(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    lines = _check(cluster)
    capacity = "PASS" if cluster.consumable_capacity else "FAIL"
    assert {check: level for check, (level, _) in lines.items()} == {
        "Kubernetes": "WARN" if cluster.version.startswith("1.34.") else "PASS",
        "resource.k8s.io/v1": "PASS",
        "consumable capacity": capacity,
        "DeviceClass": "PASS",
        "driver": capacity,
        # The chart's DaemonSet put a driver pod on the GPU node; no kubelet runs it here.
        "driver pods": "WARN",
        # and a node monitor pod, likewise never running
        "node monitor": "WARN",
        # The chart's default driver image: v0.1.0 (k8s-dra-driver#45), by tag only: a FAIL
        # (issue 48: a fleet moved onto a tag may run two drivers).
        "driver version": "WARN",
        "driver image": "FAIL",
        "devices": "PASS",
        "container runtime": "PASS",
        "pod security": "PASS",
        "legacy HAMi": "PASS",
        "GPU pools": "PASS",
        "extended resources": "PASS",
        "quotas": "PASS",
        "webhook certificate": "PASS",
        "webhook url": "PASS",
        # the chart's ValidatingWebhookConfiguration, its caBundle set by the webhook itself
        "workloads' preview": "PASS",
    }
    if cluster.consumable_capacity:
        assert lines["driver"][1] == "3 shareable GPUs on 1 node"
    else:
        assert "not multi-allocatable on gpu-node-1" in lines["driver"][1]
    assert lines["driver pods"][1] == "not running: gpu-node-1 (Pending)"
    assert "DRA nodes without a running node monitor: gpu-node-1" in lines["node monitor"][1]
    assert hami.url in lines["webhook url"][1]
    assert lines["Kubernetes"][1].startswith(f"v{cluster.version}")
    # Make two of them untrue, and watch the lines change.
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpu-memory"},
        # gpumem is kept for converted pods (docs/quotas.md); the count under limits. is
        # enforced by nobody, legacy or converted: a WARN.
        "spec": {"hard": {"limits.nvidia.com/gpumem": "100000", "limits.nvidia.com/gpu": "4"}},
    }
    cluster.apply(quota, namespace=namespace)
    scheduler = yaml.safe_load(LEGACY_SCHEDULER)
    cluster.apply(scheduler, namespace=namespace)
    report = json.loads(
        _cli("check", "--kubeconfig", str(cluster.plane.admin_kubeconfig), "-o", "json").stdout
    )
    quotas = [(q["level"], q["detail"]) for q in report["checks"] if q["check"] == "quotas"]
    assert (
        "PASS",
        f"{namespace}/gpu-memory keeps limiting converted pods: limits.nvidia.com/gpumem"
        " 0 used of 100000, 0 pods held by hami.io/gpu-quota",
    ) in quotas, quotas
    changed = _check(cluster)
    assert changed["quotas"][0] == "WARN"
    assert f"{namespace}/gpu-memory (limits.nvidia.com/gpu)" in changed["quotas"][1]
    # Legacy HAMi may run beside DRA (docs/migration.md) while its device plugin cannot
    # reach a DRA node; its scheduler alone is no problem.
    assert changed["legacy HAMi"] == (
        "PASS",
        f"running beside DRA, kept to the legacy pool: scheduler Deployment {namespace}/hami-scheduler",
    )


LEGACY_SCHEDULER = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: hami-scheduler}
spec:
  replicas: 0
  selector: {matchLabels: {app: hami-scheduler}}
  template:
    metadata: {labels: {app: hami-scheduler}}
    spec:
      containers: [{name: vgpu-scheduler-extender, image: projecthami/hami:v2.10.0}]
"""


def test_webhook_down_refuses_gpu_pods_and_admits_the_rest(
    cluster: Cluster, hami: Release, namespace: str, tmp_path: Path
) -> None:
    assert hami.webhook is not None
    folder = hami.webhook.folder
    hami.stop()
    try:
        manifest = yaml.safe_dump(gpu_pod("gpu", {"nvidia.com/gpu": 1}))
        refused = cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=manifest, check=False)
        assert refused.returncode != 0
        assert 'failed calling webhook "hami-dra-webhook.project-hami.io"' in refused.stderr
        assert "connection refused" in refused.stderr
        cluster.apply(plain_pod("cpu-only"), namespace=namespace)
        assert [p["metadata"]["name"] for p in cluster.pods(namespace)] == ["cpu-only"]
    finally:
        hami.start(folder)
    cluster.apply(gpu_pod("gpu", {"nvidia.com/gpu": 1}), namespace=namespace)
    assert "resourceClaims" in cluster.pod(namespace, "gpu")["spec"]


def _secret(cluster: Cluster) -> dict[str, Any]:
    return dict(cluster.get("secret", "hami-dra-webhook-tls", "-n", RELEASE_NAMESPACE))


def test_self_managed_certificate_and_ca_bundle_are_in_step(
    cluster: Cluster, hami: Release
) -> None:
    configuration = cluster.get("mutatingwebhookconfiguration", "hami-dra-webhook")
    client = configuration["webhooks"][0]["clientConfig"]
    assert client["url"] == hami.url
    assert client["caBundle"] == _secret(cluster)["data"]["ca.crt"]
    wait_for(lambda: hami.metric("hami_dra_api_errors_total") == 0, "no API errors")
