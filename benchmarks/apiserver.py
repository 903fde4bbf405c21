"""What the webhook adds to pod creation, measured through the real kube-apiserver.

    .venv/bin/python -m benchmarks.apiserver [--pods 400] [--clients 8] [--version 1.36]

A real control plane (etcd and kube-apiserver of the chosen version, built by
tests/controlplane; no scheduler or controller-manager, so nothing but the create calls loads
it) with the chart installed by helm and the webhook running as a local process under the
chart's ServiceAccount, reached through the MutatingWebhookConfiguration as a cluster reaches
it. `--clients` threads create GPU pods in parallel over keep-alive TLS connections, as
kube-controller-manager's ReplicaSet controller would:

- with the webhook: legacy pods (nvidia.com/gpu: 1, nvidia.com/gpumem: 3000), converted on
  the way in; their ResourceClaimTemplate is created by the first admission, then cached;
- without it (the webhook configuration deleted): the same pods, written already converted
  (the webhook's own patch applied beforehand; the template exists).

It prints pods/s and the p50/p99 of the create call for both, and their ratio. Then a restart:
the time from starting the webhook process until its /readyz answers 200, and the latency of
the first pod created through it afterwards.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import ssl
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.plane import bare_control_plane
from hami_dra_webhook.core.decision import Converted
from hami_dra_webhook.core.policy import DEFAULT_POLICY
from hami_dra_webhook.core.translate import translate_pod
from tests.controlplane.cluster import ControlPlane, free_port
from tests.controlplane.gpu_node import GpuNode
from tests.support.cluster import Cluster, Release


def legacy_pod(index: int) -> dict[str, Any]:
    limits = {"cpu": "100m", "nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"trainer-{index:06d}",
            "labels": {"app": "trainer", "pod-template-hash": "7d9f8c6b5"},
            "annotations": {"example.com/owner": "bench"},  # the Go peer's patch adds to it
        },
        "spec": {
            "containers": [
                {
                    "name": "cuda",
                    "image": "nvidia/cuda:12.4.0-base-ubuntu22.04",
                    "command": ["sleep", "infinity"],
                    "resources": {"limits": limits},
                }
            ],
            # Never scheduled (there is no scheduler here, and no such node).
            "nodeSelector": {"bench.example.com/nowhere": "true"},
        },
    }


def peer_pod(index: int) -> dict[str, Any]:
    """For the Go peer, which only knows nvidia.com/gpu (it drops the container's limits)."""
    pod = legacy_pod(index)
    pod["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
    return pod


def converted_pod(index: int, namespace: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    pod = legacy_pod(index)
    decision = translate_pod(pod, DEFAULT_POLICY, namespace)
    assert isinstance(decision, Converted)
    return decision.apply(pod), decision.templates


class Creator:
    """Creates pods as the admin over one keep-alive TLS connection per thread."""

    def __init__(self, plane: ControlPlane) -> None:
        self.port = plane.apiserver_port
        self.context = ssl.create_default_context(cafile=str(plane.pki.ca))
        self.context.load_cert_chain(plane.admin.cert, plane.admin.key)

    def connection(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context, timeout=60)

    def create(self, connection: http.client.HTTPSConnection, path: str, body: Any) -> float:
        data = json.dumps(body).encode()
        started = time.perf_counter()
        connection.request("POST", path, body=data, headers={"Content-Type": "application/json"})
        answer = connection.getresponse()
        raw = answer.read()
        elapsed = time.perf_counter() - started
        if answer.status != 201:
            raise RuntimeError(f"create {path}: {answer.status} {raw[:300]!r}")
        return elapsed

    def run(self, pods: list[dict[str, Any]], clients: int, namespace: str) -> dict[str, float]:
        path = f"/api/v1/namespaces/{namespace}/pods"
        latencies: list[float] = []
        lock = threading.Lock()
        failures: list[str] = []

        def worker(share: list[dict[str, Any]]) -> None:
            connection = self.connection()
            mine = []
            try:
                for pod in share:
                    mine.append(self.create(connection, path, pod))
            except Exception as error:  # reported below; the benchmark then stops
                failures.append(str(error))
            finally:
                connection.close()
            with lock:
                latencies.extend(mine)

        threads = [
            threading.Thread(target=worker, args=(pods[i::clients],)) for i in range(clients)
        ]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
        if failures:
            raise RuntimeError(failures[0])
        ordered = sorted(latencies)
        return {
            "pods": len(ordered),
            "pods_per_s": len(ordered) / wall,
            "p50_ms": statistics.median(ordered) * 1000,
            "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
        }


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_of(cluster: Cluster, webhook: Any) -> dict[str, float]:
    found = {p.name: cpu_seconds(p.popen.pid) for p in cluster.plane.processes}
    if webhook is not None:
        found["webhook"] = cpu_seconds(webhook.process.pid)
    return found


def go_peer_phase(
    cluster: Cluster, creator: Creator, folder: Path, count: int, clients: int
) -> tuple[dict[str, float], dict[str, float]] | None:
    """The same legacy pods through the minimal Go peer webhook of ../shared (when present):
    what any webhook costs kube-apiserver, for comparison. None without ../shared."""
    from benchmarks.bench import GO_PEER, go_peer
    from hami_dra_webhook.certs.pki import issue, write

    if not GO_PEER.is_dir():
        return None
    peer_folder = folder / "go-peer"
    bundle = issue(["127.0.0.1", "localhost"])
    write(bundle, peer_folder)
    port = free_port()
    with go_peer(peer_folder, port) as process:
        cluster.apply(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": "go-peer"},
                "webhooks": [
                    {
                        "name": "go-peer.bench.example.com",
                        "clientConfig": {
                            "url": f"https://127.0.0.1:{port}/mutate_typed",
                            "caBundle": bundle.ca_bundle,
                        },
                        "rules": [
                            {
                                "apiGroups": [""],
                                "apiVersions": ["v1"],
                                "operations": ["CREATE"],
                                "resources": ["pods"],
                            }
                        ],
                        "namespaceSelector": {
                            "matchLabels": {"kubernetes.io/metadata.name": "bench-go"}
                        },
                        "admissionReviewVersions": ["v1"],
                        "sideEffects": "None",
                        "failurePolicy": "Fail",
                    }
                ],
            },
            namespace="default",
        )
        target = namespace(cluster, "bench-go")
        creator.run([peer_pod(900_000 + i) for i in range(clients * 4)], clients, target)
        before = cpu_of(cluster, None) | {"webhook": cpu_seconds(process.pid)}
        result = creator.run([peer_pod(i) for i in range(count)], clients, target)
        after = cpu_of(cluster, None) | {"webhook": cpu_seconds(process.pid)}
        cluster.kubectl("delete", "mutatingwebhookconfiguration", "go-peer")
    return result, {name: (after[name] - before[name]) / count * 1000 for name in after}


def namespace(cluster: Cluster, name: str) -> str:
    """A namespace of its own per phase (deleting thousands of pods takes longer than making
    them). No controller-manager runs: the ServiceAccount admission plugin needs `default`."""
    cluster.kubectl("create", "namespace", name)
    cluster.kubectl("create", "serviceaccount", "default", "-n", name)
    return name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=400)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--version", default="1.36")
    args = parser.parse_args()
    with bare_control_plane(args.version) as (plane, folder):
        node = GpuNode.default()
        cluster = Cluster(plane, node, node.register(plane), folder)
        measure(cluster, args.pods, args.clients, folder)


def measure(cluster: Cluster, count: int, clients: int, folder: Path) -> None:
    namespace(cluster, "hami-system")
    hami = Release(cluster, "hami-dra-webhook", "hami-system", sets=["driver.enabled=false"])
    hami.install()
    started = time.perf_counter()
    hami.start(folder / "webhook")
    first_ready = time.perf_counter() - started
    creator = Creator(cluster.plane)
    warm = [legacy_pod(900_000 + i) for i in range(clients * 4)]
    # Warm-up (not counted): the template is created by the first admission, then cached.
    target = namespace(cluster, "bench-webhook")
    creator.run(warm, clients, target)
    before = cpu_of(cluster, hami.webhook)
    with_webhook = creator.run([legacy_pod(i) for i in range(count)], clients, target)
    after = cpu_of(cluster, hami.webhook)
    cpu_with = {name: (after[name] - before[name]) / count * 1000 for name in after}

    # Restart: process start until /readyz answers, then the first admission.
    hami.stop()
    started = time.perf_counter()
    hami.start(folder / "webhook-again")
    restart_ready = time.perf_counter() - started
    connection = creator.connection()
    path = f"/api/v1/namespaces/{target}/pods"
    first_after = creator.create(connection, path, legacy_pod(800_000))
    second_after = creator.create(connection, path, legacy_pod(800_001))
    connection.close()

    # Without the webhook: the same pods, already converted; their template exists.
    hami.stop()
    cluster.kubectl("delete", "mutatingwebhookconfiguration", hami.fullname)
    plain = namespace(cluster, "bench-none")
    pods, templates = [], []
    for index in [*range(count), *range(900_000, 900_000 + clients * 4)]:
        pod, templates = converted_pod(index, plain)
        pods.append(pod)
    for template in templates:
        cluster.apply(template, namespace=plain)
    creator.run(pods[count:], clients, plain)
    before = cpu_of(cluster, None)
    without = creator.run(pods[:count], clients, plain)
    after = cpu_of(cluster, None)
    cpu_without = {name: (after[name] - before[name]) / count * 1000 for name in after}

    peer = go_peer_phase(cluster, creator, folder, count, clients)

    version = cluster.plane.release.version
    print(
        f"kube-apiserver {version} (with etcd; no scheduler or controllers), {count} pods,"
        f" {clients} parallel clients, keep-alive TLS, {time.strftime('%Y-%m-%d')}"
    )
    print(f"{'':<30}{'pods/s':>9}{'p50 ms':>9}{'p99 ms':>9}")
    rows = [("legacy pods, webhook", with_webhook), ("converted pods, none", without)]
    if peer is not None:
        rows.append(("legacy pods, Go peer webhook", peer[0]))
    for name, result in rows:
        print(
            f"{name:<30}{result['pods_per_s']:>9.0f}{result['p50_ms']:>9.2f}{result['p99_ms']:>9.2f}"
        )
    p50 = with_webhook["p50_ms"] / without["p50_ms"]
    print(
        f"webhook/none: pods/s {with_webhook['pods_per_s'] / without['pods_per_s']:.2f},"
        f" p50 {p50:.2f} (+{(p50 - 1) * 100:.0f} %),"
        f" p99 +{with_webhook['p99_ms'] - without['p99_ms']:.2f} ms"
    )
    if peer is not None:
        go = peer[0]["p50_ms"] / without["p50_ms"]
        print(
            f"Go peer/none: pods/s {peer[0]['pods_per_s'] / without['pods_per_s']:.2f},"
            f" p50 {go:.2f} (+{(go - 1) * 100:.0f} %), p99 +{peer[0]['p99_ms'] - without['p99_ms']:.2f} ms;"
            f" CPU per pod (ms): kube-apiserver {peer[1]['kube-apiserver']:.2f}, Go peer {peer[1]['webhook']:.2f}"
        )
    print(
        "CPU per pod (ms): "
        + ", ".join(
            f"{name} {cpu_with[name]:.2f} with the webhook"
            + (f", {cpu_without[name]:.2f} without" if name in cpu_without else "")
            for name in cpu_with
        )
    )
    print(
        f"webhook start until /readyz 200: {first_ready:.2f} s (first start, certificates"
        f" issued), {restart_ready:.2f} s (restart); first pod after the restart"
        f" {first_after * 1000:.1f} ms, the next {second_after * 1000:.1f} ms"
    )


if __name__ == "__main__":
    main()
