"""What a user sees on a real node (Kubernetes 1.37): `kubectl apply` of a workload prints what
its pods become or why they will be refused (the workloads' preview, through the Service), the
converted pods carry what they were converted from, and the image runs the command line on
mounted manifests (`docker run IMAGE scan /w`). None of it depends on the Kubernetes version
(the preview is admission.k8s.io/v1, as the pod webhook, which runs on every version), so it
runs on one node version only (NODE_VERSIONS)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.node.conftest import NodeCluster
from tests.support.cluster import wait_for

pytestmark = pytest.mark.node  # the real node: runs beside the quiet tests

NODE_VERSIONS = ("1.37",)

EXAMPLES = Path(__file__).parents[2] / "examples"


def test_kubectl_apply_of_a_workload_says_what_its_pods_become(
    chart: NodeCluster, namespace: str
) -> None:
    """The workloads' preview through the Service: `kubectl apply` of examples/deployment.yaml
    prints the conversion of its pods, a workload whose pods will be refused prints why (the
    same reason as the FailedCreate event of its ReplicaSet), and the converted pods carry
    what they were converted from."""
    applied = chart.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "deployment.yaml"))
    warnings = [line for line in applied.stderr.splitlines() if line.startswith("Warning: ")]
    assert warnings[0].startswith(
        'Warning: pods of Deployment inference: container "server": 1 GPU, 16384 MiB,'
        " 50% of SMs -> hami-gpu-"
    ), applied.stderr
    assert warnings[1] == (
        "Warning: pods of Deployment inference: schedulerName hami-scheduler removed: DRA uses"
        " kube-scheduler"
    ), applied.stderr
    wait_for(lambda: len(chart.pods(namespace, "app=inference")) == 3, "the Deployment's 3 pods")
    for pod in chart.pods(namespace, "app=inference"):
        annotations = pod["metadata"]["annotations"]
        assert annotations["hami.io/converted-from"] == "server: gpu=1,gpumem=16384,gpucores=50"
    chart.kubectl("scale", "deployment/inference", "-n", namespace, "--replicas=0")

    refused = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "renamed"},
        "spec": {
            "selector": {"matchLabels": {"app": "renamed"}},
            "template": {
                "metadata": {"labels": {"app": "renamed"}},
                "spec": {
                    "containers": [
                        {
                            "name": "cuda",
                            "image": "docker.io/library/ubuntu:22.04",
                            "resources": {
                                "limits": {"nvidia.com/vgpu": 1, "nvidia.com/gpumem": 2048}
                            },
                        }
                    ]
                },
            },
        },
    }
    applied = chart.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(refused))
    said = " ".join(
        line.removeprefix("Warning: ").strip()
        for line in applied.stderr.splitlines()
        if line.startswith("Warning: ")
    )
    assert said.startswith(
        "pods of Deployment renamed will be refused at admission (a FailedCreate event of its"
        ' ReplicaSet): container "cuda": nvidia.com/vgpu is not one of the GPU resources'
    ), applied.stderr
    assert "deployment.apps/renamed created" in applied.stdout

    def failed_create() -> str:
        events = chart.get("events", "-n", namespace, "--field-selector", "reason=FailedCreate")
        return next((e["message"] for e in events["items"]), "")

    wait_for(failed_create, "the ReplicaSet's FailedCreate event", timeout=60)
    message = failed_create()
    assert "nvidia.com/vgpu is not one of the GPU resources" in message, message
    print("kubectl apply said:\n" + applied.stderr + "\nFailedCreate event:\n" + message)


def test_the_image_runs_the_command_line_on_mounted_manifests(
    chart: NodeCluster, namespace: str
) -> None:
    """`docker run IMAGE scan /w`, as a pod: the image's entrypoint is the command, so the
    migration tools need no install (docs/install.md)."""
    from tests.node.images import PROJECT_IMAGE

    chart.kubectl(
        "create", "configmap", "manifests", "-n", namespace,
        f"--from-file=deployment.yaml={EXAMPLES / 'deployment.yaml'}",
    )  # fmt: skip
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "scan"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "scan",
                    "image": PROJECT_IMAGE,
                    "imagePullPolicy": "Never",
                    "args": ["scan", "/w", "-o", "json"],
                    "volumeMounts": [{"name": "w", "mountPath": "/w", "readOnly": True}],
                }
            ],
            "volumes": [{"name": "w", "configMap": {"name": "manifests"}}],
        },
    }
    chart.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(pod))
    wait_for(
        lambda: chart.pod(namespace, "scan")["status"].get("phase") == "Succeeded",
        "the scan pod to complete",
        timeout=90,
    )
    report = json.loads(chart.kubectl("logs", "-n", namespace, "scan").stdout)
    [workload] = report["workloads"]
    assert (workload["kind"], workload["name"], workload["outcome"]) == (
        "Deployment",
        "inference",
        "converted",
    )
