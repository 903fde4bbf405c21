"""Translation speed: the in-process cost of one pod, and `dry-run` over 1,000 pods.

Run: .venv/bin/python -m benchmarks.translate   (prints numbers; asserts nothing)
"""

from __future__ import annotations

import io
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from hami_dra_webhook.cli.main import main
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from hami_dra_webhook.core.translate.pod import translate_pod


def realistic_pod(index: int, gpu_containers: int = 2, containers: int = 3) -> dict[str, Any]:
    """A Deployment-made pod of about 8 KB: probes, env, volumes, two GPU containers."""

    def container(i: int) -> dict[str, Any]:
        limits: dict[str, str] = {"cpu": "2", "memory": "4Gi"}
        if i < gpu_containers:
            limits |= {"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(4000 + 1000 * (index % 4))}
            limits |= {"nvidia.com/gpucores": "30"}
        return {
            "name": f"worker-{i}",
            "image": f"registry.example.com/ml/worker-{i}:v1.{index % 7}",
            "command": ["/bin/sh", "-c"],
            "args": [f"exec /app/server --port=80{i}0 --metrics=:90{i}0 --log-level=info"],
            "ports": [{"name": "http", "containerPort": 8000 + i, "protocol": "TCP"}],
            "env": [
                {"name": f"SETTING_{j}", "value": f"value-{i}-{j}-xxxxxxxxxx"} for j in range(12)
            ],
            "resources": {"limits": limits, "requests": {"cpu": "500m", "memory": "1Gi"}},
            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            "livenessProbe": {
                "httpGet": {"path": "/healthz", "port": 8000 + i},
                "periodSeconds": 10,
            },
            "readinessProbe": {
                "httpGet": {"path": "/readyz", "port": 8000 + i},
                "periodSeconds": 5,
            },
            "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True},
        }

    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"trainer-{index}",
            "namespace": "ml",
            "labels": {"app": "trainer", "team": "ml", "pod-template-hash": "7d9f8c6b5"},
            "annotations": {"nvidia.com/use-gputype": "A100,H100", "prometheus.io/scrape": "true"},
        },
        "spec": {
            "containers": [container(i) for i in range(containers)],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ],
            "schedulerName": "hami-scheduler",
        },
    }


def manifest_pod(index: int) -> dict[str, Any]:
    """A pod as people write it in a manifest (about 300 bytes of YAML)."""
    limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000 + index % 8, "nvidia.com/gpucores": 30}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"gpu-pod-{index}"},
        "spec": {
            "containers": [
                {
                    "name": "cuda",
                    "image": "ubuntu:22.04",
                    "command": ["bash", "-c", "sleep 86400"],
                    "resources": {"limits": limits},
                }
            ]
        },
    }


def median_translate_us(runs: int = 5000) -> tuple[float, float, int]:
    pod = realistic_pod(1)
    size = len(json.dumps(pod))
    for _ in range(200):
        translate_pod(pod, DEFAULT_POLICY, "ml")
    samples = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        result = translate_pod(pod, DEFAULT_POLICY, "ml")
        json.dumps(result.patch)
        samples.append(time.perf_counter_ns() - start)
    samples.sort()
    return statistics.median(samples) / 1000, samples[int(len(samples) * 0.99)] / 1000, size


def dry_run_seconds(path: Path) -> tuple[float, float]:
    start = time.perf_counter()
    code = main(["dry-run", str(path)], stdout=io.StringIO(), stderr=io.StringIO())
    in_process = time.perf_counter() - start
    assert code == 0
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "hami_dra_webhook", "dry-run", str(path)],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return in_process, time.perf_counter() - start


def main_benchmark() -> None:
    median, p99, size = median_translate_us()
    print(f"translate_pod, one {size / 1024:.1f} KB pod with 2 GPU containers (+ patch to JSON):")
    print(f"  median {median:.1f} us, p99 {p99:.1f} us over 5000 runs")
    for label, pods in (
        ("hand-written manifests", [manifest_pod(i) for i in range(1000)]),
        ("API-server-sized pods", [realistic_pod(i) for i in range(1000)]),
    ):
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "pods.yaml"
            path.write_text(yaml.safe_dump_all(pods))
            size_mb = path.stat().st_size / 1e6
            in_process, whole = dry_run_seconds(path)
        print(f"dry-run of 1,000 {label} in one {size_mb:.1f} MB YAML file:")
        print(
            f"  {in_process:.2f} s in process, {whole:.2f} s as a new process (start-up included)"
        )


if __name__ == "__main__":
    main_benchmark()
