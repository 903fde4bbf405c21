"""The chart on a real node: its webhook Deployment runs from the image built from the
Dockerfile, under the chart's own security context and probes, writes its certificate from
inside the pod, and kube-apiserver reaches it through its Service."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from tests.node.conftest import NAMESPACE, RELEASE, NodeCluster
from tests.support.cluster import wait_for


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
