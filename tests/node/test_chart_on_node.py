"""The chart on a real node: its webhook Deployment runs from the image built from the
Dockerfile, under the chart's own security context and probes, writes its certificate from
inside the pod, and kube-apiserver reaches it through its Service."""

from __future__ import annotations

import base64
import json

import pytest

from tests.node.conftest import NAMESPACE, RELEASE, NodeCluster
from tests.support.cluster import wait_for

pytestmark = pytest.mark.node  # the real node: runs beside the quiet tests


def test_the_webhook_pods_run_restricted_and_ready(chart: NodeCluster) -> None:
    pods = chart.pods(NAMESPACE, "app.kubernetes.io/component=webhook")
    assert len(pods) == 2, [p["metadata"]["name"] for p in pods]
    for pod in pods:
        assert pod["status"]["phase"] == "Running"
        ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
        assert ready["Ready"] == "True", pod["status"]
        container = pod["spec"]["containers"][0]
        context = container["securityContext"]
        assert context["readOnlyRootFilesystem"] is True
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"]["drop"] == ["ALL"]
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
        assert container["image"] == "localhost/hami-dra-webhook:node-test"
        # The user the image declares and the chart requires, as the kubelet ran it.
        status = pod["status"]["containerStatuses"][0]
        assert status["ready"] and status["restartCount"] == 0
        user = chart.kubectl(
            "exec",
            "-n",
            NAMESPACE,
            pod["metadata"]["name"],
            "--",
            "python",
            "-c",
            "import os; print(os.getuid(), os.getgid())",
        ).stdout.split()
        assert user == ["65532", "65532"]


def test_self_managed_certificate_written_from_inside_the_pod(chart: NodeCluster) -> None:
    secret = chart.get("secret", f"{RELEASE}-tls", "-n", NAMESPACE)
    # Opaque: it also keeps the CA's key, from which the replicas renew.
    assert set(secret["data"]) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}, secret["data"].keys()
    ca = base64.b64decode(secret["data"]["ca.crt"])
    configuration = chart.get("mutatingwebhookconfiguration", RELEASE)
    for webhook in configuration["webhooks"]:
        config = webhook["clientConfig"]
        assert "url" not in config, "called through the Service, not a URL"
        assert config["service"]["name"] == RELEASE
        assert base64.b64decode(config["caBundle"]) == ca
    # Only the webhook's pods could have written it: no process on this machine has run it.
    webhook_pods = {
        p["metadata"]["name"] for p in chart.pods(NAMESPACE, "app.kubernetes.io/component=webhook")
    }
    logs = "".join(chart.kubectl("logs", "-n", NAMESPACE, name).stdout for name in webhook_pods)
    assert "certificate" in logs.lower(), logs[-2000:]


def test_helm_test_passes_through_the_service(chart: NodeCluster) -> None:
    result = chart.helm("test", RELEASE, "-n", NAMESPACE, "--timeout", "120s", check=False)
    log = chart.kubectl("logs", "-n", NAMESPACE, f"{RELEASE}-test", check=False)
    assert result.returncode == 0, result.stderr + log.stdout + log.stderr
    assert "Phase:          Succeeded" in result.stdout, result.stdout


def test_driver_daemonset_publishes_what_v0_1_0_publishes(chart: NodeCluster) -> None:
    pods = chart.pods(NAMESPACE, "app.kubernetes.io/component=dra-driver")
    assert len(pods) == 1 and pods[0]["status"]["phase"] == "Running"
    # The startup probe (gRPC health, service liveness) passed: the container is ready.
    assert pods[0]["status"]["containerStatuses"][0]["ready"] is True
    published = chart.driver_slice()
    assert published is not None
    assert published["spec"]["driver"] == "hami-core-gpu.project-hami.io"
    assert published["spec"]["pool"]["name"] == chart.node.name
    devices = {d["name"]: d for d in published["spec"]["devices"]}
    expected = {gpu.device_name: gpu.device() for gpu in chart.node.gpus}
    assert sorted(devices) == sorted(expected)
    for name, device in devices.items():
        want = expected[name]
        assert device["attributes"] == want["attributes"], name
        assert device["allowMultipleAllocations"] is True
        for capacity in ("cores", "memory"):
            assert _quantities(device["capacity"][capacity]) == _quantities(
                want["capacity"][capacity]
            )


def _quantities(value: object) -> str:
    """A capacity as a comparable string: the API server writes 24Gi for 25769803776."""
    text = json.dumps(value, sort_keys=True)
    for gib in (24, 80):
        text = text.replace(f'"{gib * 1024**3}"', f'"{gib}Gi"')
    return text.replace('"1048576"', '"1Mi"')


def test_a_legacy_pod_through_the_service_is_converted_and_runs(
    chart: NodeCluster, namespace: str
) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "legacy"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "cuda",
                    "image": "docker.io/library/ubuntu:22.04",
                    "command": ["nvidia-smi"],
                    "resources": {
                        "limits": {
                            "nvidia.com/gpu": 1,
                            "nvidia.com/gpumem": 3000,
                            "nvidia.com/gpucores": 30,
                        }
                    },
                }
            ],
        },
    }
    applied = chart.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(pod))
    assert "1 GPU, 3000 MiB, 30% of SMs" in applied.stderr
    wait_for(
        lambda: chart.pod(namespace, "legacy")["status"].get("phase") == "Succeeded",
        "the converted pod to complete",
        timeout=90,
    )
    log = chart.kubectl("logs", "-n", namespace, "legacy").stdout
    assert "CUDA_DEVICE_MEMORY_LIMIT_0=3000m" in log and "CUDA_DEVICE_SM_LIMIT_0=30" in log
