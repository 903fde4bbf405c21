"""`scan --cluster` and `gc` against a real kube-apiserver holding a large cluster's objects.

    .venv/bin/python -m benchmarks.scan [--pods 50000] [--workloads 5000] [--templates 10000]

A real control plane (etcd and kube-apiserver, built by tests/controlplane; no scheduler or
controller-manager: nothing runs the pods, they only have to exist) is filled by parallel
creates over keep-alive TLS: `--workloads` Deployments with a GPU pod template, `--pods` pods
of about 3 KB each (90 % owned by a ReplicaSet, as a Deployment's are; the rest bare, one in
five of those asking for a GPU), spread over 10 namespaces, and `--templates`
ResourceClaimTemplates as the webhook writes them. Then, each as a new process:
`scan --cluster -A -o json` and `gc --dry-run`: wall time and the process's peak RSS
(`wait4`'s ru_maxrss). Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from benchmarks.apiserver import Creator
from benchmarks.plane import bare_control_plane
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from hami_dra_webhook.core.translate.pod import translate_pod
from tests.controlplane.cluster import ControlPlane

NAMESPACES = [f"bench-{index}" for index in range(10)]


def _container(index: int, gpu: bool) -> dict[str, Any]:
    limits = {"cpu": "2", "memory": "8Gi"}
    if gpu:
        limits |= {"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(1000 + index % 40)}
    return {
        "name": "main",
        "image": f"registry.example.com/ml/trainer:v1.{index % 97}",
        "command": ["/bin/sh", "-c", "exec /app/train --epochs=10 --log-level=info"],
        "env": [
            {"name": f"SETTING_{j}", "value": f"value-{index}-{j}-xxxxxxxx"} for j in range(20)
        ],
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "resources": {"limits": limits, "requests": {"cpu": "1", "memory": "4Gi"}},
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8080}, "periodSeconds": 5},
    }


def _pod(index: int) -> dict[str, Any]:
    owned = index % 10 != 0
    gpu = owned or index % 50 == 0
    metadata: dict[str, Any] = {"name": f"pod-{index:06d}", "labels": {"app": f"a{index % 500}"}}
    if owned:
        metadata["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": f"rs-{index % 5000}",
                "uid": f"00000000-0000-0000-0000-{index % 5000:012d}",
                "controller": True,
            }
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": [_container(index, gpu)]},
    }


def _deployment(index: int) -> dict[str, Any]:
    labels = {"app": f"d{index}"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"deploy-{index:05d}"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [_container(index, True)]},
            },
        },
    }


def _template(index: int, namespace: str) -> dict[str, Any]:
    pod = {"spec": {"containers": [_container(index, True) | {"env": []}]}}
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem"] = str(100 + index)
    templates = translate_pod(pod, DEFAULT_POLICY, namespace).templates  # type: ignore[union-attr]
    return templates[0]


def _fill(creator: Creator, jobs: list[tuple[str, dict[str, Any]]], clients: int) -> float:
    """Create every (path, object) in parallel; objects/s."""
    failures: list[str] = []

    def worker(share: list[tuple[str, dict[str, Any]]]) -> None:
        connection = creator.connection()
        try:
            for path, body in share:
                creator.create(connection, path, body)
        except Exception as error:  # reported below
            failures.append(str(error))
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(jobs[i::clients],)) for i in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise RuntimeError(failures[0])
    return len(jobs) / (time.perf_counter() - started)


def _measured(*args: str) -> tuple[float, float, int, str]:
    """Run the CLI as a new process: wall seconds, its peak RSS in MiB, exit code, stderr's end
    (`measured_output` says how)."""
    wall, peak, code, _, err = measured_output(*args)
    return wall, peak, code, err[-300:]


def measured_output(*args: str) -> tuple[float, float, int, str, str]:
    """Run the CLI as a new process: wall seconds, its peak RSS in MiB (VmRSS read every 20 ms:
    `wait4`'s ru_maxrss would count the pages the child shared with this process between fork
    and exec), exit code, stdout, stderr."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-m", "hami_dra_webhook", *args], stdout=out, stderr=err
        )
        peak = 0
        while process.poll() is None:
            peak = max(peak, _rss_kib(process.pid))
            time.sleep(0.02)
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        text, said = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    return wall, peak / 1024, process.returncode, text, said


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=50_000)
    parser.add_argument("--workloads", type=int, default=5_000)
    parser.add_argument("--templates", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--version", default="1.36")
    args = parser.parse_args()
    with bare_control_plane(args.version) as (plane, _):
        run_on(plane, args)


def where(index: int) -> str:
    return NAMESPACES[index % len(NAMESPACES)]


def run_on(plane: ControlPlane, args: argparse.Namespace) -> None:
    creator = Creator(plane)
    setup: list[tuple[str, dict[str, Any]]] = []
    for name in NAMESPACES:
        setup.append(
            (
                "/api/v1/namespaces",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
            )
        )
    _fill(creator, setup, 1)
    accounts = [
        (
            f"/api/v1/namespaces/{name}/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
        )
        for name in NAMESPACES
    ]
    _fill(creator, accounts, 1)
    pods = [(f"/api/v1/namespaces/{where(i)}/pods", _pod(i)) for i in range(args.pods)]
    rate = _fill(creator, pods, args.clients)
    print(f"created {args.pods} pods: {rate:.0f}/s")
    del pods
    deployments = [
        (f"/apis/apps/v1/namespaces/{where(i)}/deployments", _deployment(i))
        for i in range(args.workloads)
    ]
    rate = _fill(creator, deployments, args.clients)
    del deployments
    print(f"created {args.workloads} Deployments: {rate:.0f}/s")
    templates = [
        (
            f"/apis/resource.k8s.io/v1/namespaces/{where(i)}/resourceclaimtemplates",
            _template(i, where(i)),
        )
        for i in range(args.templates)
    ]
    rate = _fill(creator, templates, args.clients)
    del templates
    gc.collect()  # what was sent is not this process's to keep while the CLI is measured
    print(f"created {args.templates} ResourceClaimTemplates: {rate:.0f}/s")
    kubeconfig = str(plane.admin_kubeconfig)
    wall, peak, code, err = _measured(
        "scan", "--cluster", "-A", "--kubeconfig", kubeconfig, "-o", "json"
    )
    print(f"scan --cluster -A: {wall:.1f} s, peak RSS {peak:.0f} MiB, exit {code}")
    if code not in (0, 1, 2):
        print(err)
    wall, peak, code, err = _measured("gc", "--dry-run", "--kubeconfig", kubeconfig)
    print(
        f"gc --dry-run over {args.templates} templates: {wall:.1f} s, peak RSS {peak:.0f} MiB, exit {code}"
    )
    print(err.strip().splitlines()[-1] if err.strip() else "")


if __name__ == "__main__":
    main()
