"""Converted pods over their life on a real node: capacity comes back when pods end (claims
deallocated and unprepared), running pods survive a kubelet restart, a claim the driver cannot
prepare is reported by the kubelet and leaves nothing prepared, and `check` tells the truth."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.node.conftest import NAMESPACE, RELEASE, NodeCluster
from tests.node.node import CDI_DIR
from tests.node.workloads import gpu_env, limits_of, sleeping_pod
from tests.support.cluster import wait_for

pytestmark = pytest.mark.node  # the real node: runs beside the quiet tests

L4_0 = "GPU-1c000000-0000-4000-8000-000000000000"


def apply(cluster: NodeCluster, namespace: str, manifest: dict[str, Any]) -> None:
    cluster.apply(manifest, namespace=namespace)


def phase(cluster: NodeCluster, namespace: str, name: str) -> str:
    return str(cluster.pod(namespace, name)["status"].get("phase"))


def cdi_specs(cluster: NodeCluster) -> set[str]:
    """The CDI spec files the driver has written (one per prepared claim), as the node sees them."""
    assert cluster.real is not None
    folder = cluster.real.folder / "host" / CDI_DIR.relative_to("/")
    return {path.name for path in folder.glob("*.json")}


def claim_uids(cluster: NodeCluster, namespace: str) -> set[str]:
    return {c["metadata"]["uid"] for c in cluster.get("resourceclaims", "-n", namespace)["items"]}


def _on_the_card(cluster: NodeCluster, namespace: str, index: int) -> str:
    """What a fill pod that does not run is told, and every claim allocated in the cluster with
    its device and what it consumes (a loaded run saw fill-7 wait past 120 s twice; this says
    why when it happens again)."""
    status = cluster.pod(namespace, f"fill-{index}")["status"]
    allocated = [
        f"{claim['metadata']['namespace']}/{claim['metadata']['name']}: {result.get('device')}"
        f" {json.dumps(result.get('consumedCapacity'))}"
        for claim in cluster.get("resourceclaims", "-A")["items"]
        for result in ((claim.get("status") or {}).get("allocation") or {})
        .get("devices", {})
        .get("results", [])
    ]
    return f"fill-{index}: {json.dumps(status.get('conditions'))}\nallocated: {allocated}"


# kube-scheduler retries a pod it found unschedulable on an event that may make it fit (for its
# DRA plugin, 1.37.2's source: a claim added, deallocated or deleted with an allocation), and
# after 5 minutes in any case (podMaxInUnschedulablePodsDuration). Twice on a loaded machine
# (the second on 2026-12-07, five test jobs at once) fill-7 waited past 120 s as "cannot
# allocate all claims" beside seven 3000 MiB claims on the 24 GiB card, with room left; why it
# was not retried at once is not known. The test waits out those 5 minutes: what it checks is
# the card's capacity, not kube-scheduler's retries.
UNSCHEDULABLE_FLUSH = 300


def test_capacity_comes_back(chart: NodeCluster, quiet_namespace: str) -> None:
    """Eight 3000 MiB pods fill one 24 GiB card (24,000 of 24,576 MiB); a ninth waits; when one
    ends its claim is deallocated and unprepared, and the ninth runs."""
    namespace = quiet_namespace
    pin = {"nvidia.com/use-gpuuuid": L4_0}
    before = cdi_specs(chart)
    for index in range(8):
        apply(chart, namespace, sleeping_pod(f"fill-{index}", {"nvidia.com/gpumem": 3000}, pin))
    for index in range(8):
        try:
            wait_for(
                lambda index=index: phase(chart, namespace, f"fill-{index}") == "Running",
                f"fill-{index} running",
                timeout=UNSCHEDULABLE_FLUSH + 30,
            )
        except AssertionError as error:
            raise AssertionError(f"{error}\n{_on_the_card(chart, namespace, index)}") from error
    apply(chart, namespace, sleeping_pod("ninth", {"nvidia.com/gpumem": 3000}, pin))
    wait_for(
        lambda: (
            "cannot allocate all claims"
            in json.dumps(chart.pod(namespace, "ninth")["status"].get("conditions", []))
        ),
        "the ninth pod unschedulable",
        timeout=60,
    )
    assert phase(chart, namespace, "ninth") == "Pending"
    prepared = cdi_specs(chart) - before
    assert len(prepared) == 8, prepared
    gone = chart.pod(namespace, "fill-0")
    gone_claim = gone["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    gone_uid = chart.get("resourceclaim", gone_claim, "-n", namespace)["metadata"]["uid"]
    assert any(gone_uid in name for name in prepared)
    chart.kubectl("delete", "pod", "fill-0", "-n", namespace, "--grace-period=1")
    wait_for(
        lambda: phase(chart, namespace, "ninth") == "Running", "the ninth pod running", timeout=120
    )
    assert (
        chart.kubectl("get", "resourceclaim", gone_claim, "-n", namespace, check=False).returncode
        != 0
    )
    wait_for(
        lambda: not any(gone_uid in name for name in cdi_specs(chart)),
        "the ended pod's claim unprepared",
    )
    env = gpu_env(chart.kubectl("exec", "-n", namespace, "ninth", "--", "env").stdout)
    assert limits_of(env) == [("3000m", "0")] and env["NVIDIA_VISIBLE_DEVICES"] == L4_0


def test_running_pods_survive_a_kubelet_restart(chart: NodeCluster, quiet_namespace: str) -> None:
    namespace = quiet_namespace
    apply(
        chart,
        namespace,
        sleeping_pod(
            "steady", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000, "nvidia.com/gpucores": 30}
        ),
    )
    wait_for(lambda: phase(chart, namespace, "steady") == "Running", "the pod running", timeout=120)
    before = chart.pod(namespace, "steady")["status"]["containerStatuses"][0]
    claim = chart.pod(namespace, "steady")["status"]["resourceClaimStatuses"][0][
        "resourceClaimName"
    ]
    uid = chart.get("resourceclaim", claim, "-n", namespace)["metadata"]["uid"]
    assert chart.real is not None
    chart.real.restart_kubelet()
    # The kubelet re-reads its checkpoint; the pod keeps its container and its claim.
    wait_for(
        lambda: chart.pod(namespace, "steady")["status"]["containerStatuses"][0].get("ready"),
        "the pod ready after the restart",
        timeout=60,
    )
    after = chart.pod(namespace, "steady")["status"]["containerStatuses"][0]
    assert after["containerID"] == before["containerID"] and after["restartCount"] == 0
    assert any(uid in name for name in cdi_specs(chart)), "the claim is still prepared"
    stored = chart.get("resourceclaim", claim, "-n", namespace)
    assert stored["status"]["reservedFor"][0]["name"] == "steady"
    # Right after its restart the kubelet may not serve exec for a while ("pod does not exist").
    shown = wait_for(
        lambda: chart.kubectl("exec", "-n", namespace, "steady", "--", "env", check=False).stdout,
        "exec into the pod after the restart",
        timeout=60,
    )
    assert limits_of(gpu_env(shown)) == [("3000m", "30")]
    # New pods still get their claims prepared by the restarted kubelet.
    apply(chart, namespace, sleeping_pod("after-restart", {"nvidia.com/gpumem": 1000}))
    wait_for(
        lambda: phase(chart, namespace, "after-restart") == "Running",
        "a new pod running",
        timeout=120,
    )


def test_a_claim_the_driver_cannot_prepare_is_reported_and_leaves_nothing(
    chart: NodeCluster, quiet_namespace: str
) -> None:
    """A claim with opaque parameters the driver does not know: the kubelet reports the driver's
    reason in the pod's events, the pod does not start, nothing stays prepared."""
    namespace = quiet_namespace
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "odd-config"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": "hami-core-gpu.project-hami.io",
                                "capacity": {"requests": {"memory": "1Gi", "cores": "10"}},
                            },
                        }
                    ],
                    "config": [
                        {
                            "requests": ["gpu"],
                            "opaque": {
                                "driver": "hami-core-gpu.project-hami.io",
                                "parameters": {"apiVersion": "example.com/v1", "kind": "Unknown"},
                            },
                        }
                    ],
                }
            }
        },
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "odd"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "odd-config"}],
            "containers": [
                {
                    "name": "cuda",
                    "image": "docker.io/library/ubuntu:22.04",
                    "command": ["sleep", "3600"],
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
        },
    }
    before = cdi_specs(chart)
    apply(chart, namespace, template)
    apply(chart, namespace, pod)

    def reported() -> str | None:
        events = chart.get("events", "-n", namespace, "--field-selector", "involvedObject.name=odd")
        messages = " | ".join(e.get("message", "") for e in events["items"])
        return messages if "is not supported by this driver" in messages else None

    messages = wait_for(reported, "the kubelet's event with the driver's reason", timeout=90)
    assert "FailedPrepareDynamicResources" in json.dumps(
        chart.get("events", "-n", namespace, "--field-selector", "involvedObject.name=odd")
    ), messages
    assert phase(chart, namespace, "odd") == "Pending"
    uids = claim_uids(chart, namespace)
    assert cdi_specs(chart) - before == set()
    assert not [name for name in cdi_specs(chart) if any(uid in name for uid in uids)]


def test_check_tells_the_truth_about_this_cluster(chart: NodeCluster) -> None:
    """`hami-dra-webhook check` against this cluster: the driver pod is Running, its node
    publishes devices, the runtime has CDI; no line fails but the driver image's (the
    stand-in is imported by tag, with no digest to pin: exit 2)."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "hami_dra_webhook",
            "check",
            f"--kubeconfig={chart.plane.admin_kubeconfig}",
            f"--webhook-namespace={NAMESPACE}",
            f"--release={RELEASE}",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    report = json.loads(result.stdout)
    said = {line["check"]: (line["level"], line["detail"]) for line in report["checks"]}
    # Each line against what this cluster is (the stand-in's three cards on one node).
    ready = [
        address
        for subset in chart.get("endpoints", RELEASE, "-n", NAMESPACE).get("subsets", [])
        for address in subset.get("addresses", [])
    ]
    driver_pods = chart.pods(NAMESPACE, "app.kubernetes.io/component=dra-driver")
    assert [p["status"]["phase"] for p in driver_pods] == ["Running"]
    image = driver_pods[0]["spec"]["containers"][0]["image"]
    expected = {
        # The stand-in's image: a tag of its own (not v0.1.0), imported without a digest.
        "driver version": ("PASS", image),
        "driver image": ("FAIL", f"not pinned by a digest: {image}"),
        "Kubernetes": ("PASS", f"v{chart.plane.release.version}"),
        "driver": ("PASS", "3 shareable GPUs on 1 node"),
        "driver pods": ("PASS", "running on all 1 GPU node(s)"),
        "node monitor": ("PASS", "running on all 1 DRA GPU node(s)"),
        "devices": ("PASS", "hami-gpu-N devices on 1 node(s) with a driver pod"),
        "container runtime": ("PASS", "CDI-capable on every GPU node"),
        "webhook service": ("PASS", f"{len(ready)} ready endpoint(s) behind {NAMESPACE}/{RELEASE}"),
        # the chart's ValidatingWebhookConfiguration; the webhook pods set its caBundle too
        "workloads' preview": (
            "PASS",
            "kubectl apply of a workload says what its pods become (2 webhooks)",
        ),
    }
    for check, line in expected.items():
        assert said[check] == line, (check, said)
    assert len(ready) == 2
    assert all(level != "FAIL" for check, (level, _) in said.items() if check != "driver image")
    assert report["nodes"] == [
        {"node": chart.node.name, "gpus": 3, "memory": ["24Gi", "24Gi", "80Gi"], "shareable": True}
    ]
    Path(chart.folder / "check.json").write_text(result.stdout)
