"""What the webhook adds to pod creation, measured through the real kube-apiserver.

    .venv/bin/python -m benchmarks.apiserver [--pods 400] [--rounds 3] [--clients 8] [--version 1.36]

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

- its conditions only: the converted pods again, in a namespace the webhook selects, so that
  kube-apiserver evaluates the chart's matchConditions (no legacy resource: the webhook is not
  called): what every pod of a selected namespace pays for them;
- with the Go peer (../shared/anchors/go-webhook, its typed endpoint, no matchConditions): the
  same pods as far as it knows them (nvidia.com/gpu only), what a minimal webhook costs
  kube-apiserver.

The four phases run in turn, `--rounds` times, each in a namespace of its own (namespace labels
select the webhook), so that the machine's drift falls on all three. It prints, as medians over
the rounds, pods/s, the p50/p99 of the create call, kube-apiserver's CPU a pod (from /proc) and
what the webhook adds to each, each round's figures, and every request kube-apiserver served
besides the pod creates (its own `apiserver_request_total`, by verb and resource: the webhook's
template creates and reads, its watch, the benchmark's /metrics reads). Then a restart: the time
from starting the webhook process until its /readyz answers 200, and the latency of the first
pod created through it afterwards.
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
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from benchmarks.plane import bare_control_plane
from hami_dra_webhook.core.outcome.decision import Converted
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from hami_dra_webhook.core.translate.pod import translate_pod
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

    def run(
        self,
        pods: list[dict[str, Any]],
        clients: int,
        namespace: str,
        collection: str = "/api/v1/namespaces/{namespace}/pods",
    ) -> dict[str, float]:
        """Create `pods` (or other objects: `collection` is their path) from `clients` threads."""
        path = collection.format(namespace=namespace)
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


def api_requests(creator: Creator) -> Counter[str]:
    """kube-apiserver's own count of the requests it served, by verb and resource
    (`apiserver_request_total`), read from its /metrics."""
    connection = creator.connection()
    try:
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
    finally:
        connection.close()
    found: Counter[str] = Counter()
    for family in text_string_to_metric_families(text):
        if family.name != "apiserver_request":
            continue
        for sample in family.samples:
            if sample.name != "apiserver_request_total":
                continue
            labels = sample.labels
            resource = labels.get("resource", "") + (
                f"/{labels['subresource']}" if labels.get("subresource") else ""
            )
            found[f"{labels.get('verb', '?')} {resource or labels.get('component', '?')}"] += int(
                sample.value
            )
    return found


def accepted_connections() -> int:
    """TCP connections this machine has accepted so far (all ports; /proc/net/snmp)."""
    lines = [line.split() for line in Path("/proc/net/snmp").read_text().splitlines()]
    names, values = (line for line in lines if line[0] == "Tcp:")
    return int(values[names.index("PassiveOpens")])


@dataclass
class Phase:
    """One way of creating the pods (this webhook, none, its conditions only, the Go peer), measured
    over rounds interleaved with the other phases, so that the machine's drift falls on all."""

    name: str
    results: list[dict[str, float]] = field(default_factory=list)
    cpu: list[dict[str, float]] = field(default_factory=list)  # ms a pod, by process
    other_requests: Counter[str] = field(default_factory=Counter)  # besides the pod creates
    pods: int = 0
    accepted: int = 0  # TCP connections accepted on the machine meanwhile

    def measure(
        self,
        cluster: Cluster,
        creator: Creator,
        pods: list[dict[str, Any]],
        clients: int,
        target: str,
        processes: dict[str, int],
        collection: str = "/api/v1/namespaces/{namespace}/pods",
        created: str = "POST pods",
    ) -> None:
        def cpu() -> dict[str, float]:
            found = {p.name: cpu_seconds(p.popen.pid) for p in cluster.plane.processes}
            return found | {name: cpu_seconds(pid) for name, pid in processes.items()}

        requests_before, before = api_requests(creator), cpu()
        opened = accepted_connections()
        self.results.append(creator.run(pods, clients, target, collection))
        self.accepted += accepted_connections() - opened
        after, requests_after = cpu(), api_requests(creator)
        self.cpu.append({name: (after[name] - before[name]) / len(pods) * 1000 for name in after})
        requests_after.subtract(requests_before)
        requests_after[created] -= len(pods)
        self.other_requests.update(+requests_after)
        self.pods += len(pods)

    def median(self, key: str) -> float:
        return statistics.median(r[key] for r in self.results)

    def cpu_median(self, process: str) -> float:
        return statistics.median(c[process] for c in self.cpu)


GO_PEER_LABEL = "bench.example.com/go-peer"


def register_go_peer(cluster: Cluster, folder: Path, port: int) -> None:
    """The Go peer's MutatingWebhookConfiguration: pod CREATEs in namespaces labelled for it."""
    from hami_dra_webhook.certs.pki import issue, write

    bundle = issue(["127.0.0.1", "localhost"])
    write(bundle, folder)
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
                    "namespaceSelector": {"matchLabels": {GO_PEER_LABEL: "true"}},
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                    "failurePolicy": "Fail",
                }
            ],
        },
        namespace="default",
    )


def namespace(cluster: Cluster, name: str, **labels: str) -> str:
    """A namespace of its own per phase and round (deleting thousands of pods takes longer than
    making them). No controller-manager runs: the ServiceAccount admission plugin needs
    `default`."""
    cluster.kubectl("create", "namespace", name)
    if labels:
        cluster.kubectl("label", "namespace", name, *(f"{k}={v}" for k, v in labels.items()))
    cluster.kubectl("create", "serviceaccount", "default", "-n", name)
    return name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=400, help="pods a phase and round (400)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the four phases (3)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--version", default="1.36")
    args = parser.parse_args()
    from benchmarks.bench import GO_PEER

    if not GO_PEER.is_dir():
        raise SystemExit(f"the Go peer is not at {GO_PEER} (../shared beside the repository)")
    with bare_control_plane(args.version) as (plane, folder):
        node = GpuNode.default()
        cluster = Cluster(plane, node, node.register(plane), folder)
        measure(cluster, args.pods, args.rounds, args.clients, folder)


def measure(cluster: Cluster, count: int, rounds: int, clients: int, folder: Path) -> None:
    from benchmarks.bench import go_peer

    namespace(cluster, "hami-system")
    hami = Release(cluster, "hami-dra-webhook", "hami-system", sets=["driver.enabled=false"])
    hami.install()
    started = time.perf_counter()
    hami.start(folder / "webhook")
    first_ready = time.perf_counter() - started
    creator = Creator(cluster.plane)
    ours, none, conditions, peer = (
        Phase("legacy pods, this webhook"),
        Phase("converted pods, no webhook"),
        Phase("converted pods, its conditions"),
        Phase("legacy pods, Go peer webhook"),
    )
    port = free_port()
    register_go_peer(cluster, folder / "go-peer", port)
    with go_peer(folder / "go-peer", port) as go_process:
        for round_ in range(rounds):
            # This webhook: legacy pods; the first admissions in the namespace (not counted)
            # create the template, the rest find it cached.
            target = namespace(cluster, f"bench-webhook-{round_}")
            creator.run([legacy_pod(900_000 + i) for i in range(clients * 4)], clients, target)
            webhook_pid = {"webhook": hami.webhook.process.pid, "go-peer": go_process.pid}
            ours.measure(
                cluster,
                creator,
                [legacy_pod(i) for i in range(count)],
                clients,
                target,
                webhook_pid,
            )
            # No webhook (this one skips namespaces labelled so): the same pods, already
            # converted; their template exists.
            plain = namespace(cluster, f"bench-none-{round_}", **{"hami.io/webhook": "ignore"})
            pods, templates = [], []
            for index in [*range(count), *range(900_000, 900_000 + clients * 4)]:
                pod, templates = converted_pod(index, plain)
                pods.append(pod)
            for template in templates:
                cluster.apply(template, namespace=plain)
            creator.run(pods[count:], clients, plain)
            none.measure(cluster, creator, pods[:count], clients, plain, webhook_pid)
            # The same converted pods where this webhook is registered: kube-apiserver
            # evaluates its matchConditions (no legacy resource: not called), the cost every
            # pod of a selected namespace pays.
            checked = namespace(cluster, f"bench-conditions-{round_}")
            for template in converted_pod(0, checked)[1]:
                cluster.apply(template, namespace=checked)
            creator.run(pods[count:], clients, checked)
            conditions.measure(cluster, creator, pods[:count], clients, checked, webhook_pid)
            # The Go peer, with the pods it knows.
            target_go = namespace(
                cluster,
                f"bench-go-{round_}",
                **{"hami.io/webhook": "ignore", GO_PEER_LABEL: "true"},
            )
            creator.run([peer_pod(900_000 + i) for i in range(clients * 4)], clients, target_go)
            peer.measure(
                cluster,
                creator,
                [peer_pod(i) for i in range(count)],
                clients,
                target_go,
                webhook_pid,
            )

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
    hami.stop()
    report(cluster, count, rounds, clients, (ours, none, conditions, peer))
    print(
        f"webhook start until /readyz 200: {first_ready:.2f} s (first start, certificates"
        f" issued), {restart_ready:.2f} s (restart); first pod after the restart"
        f" {first_after * 1000:.1f} ms, the next {second_after * 1000:.1f} ms"
    )


def report(
    cluster: Cluster,
    count: int,
    rounds: int,
    clients: int,
    phases: tuple[Phase, Phase, Phase, Phase],
) -> None:
    ours, none, conditions, peer = phases
    version = cluster.plane.release.version
    print(
        f"kube-apiserver {version} (with etcd; no scheduler or controllers), {count} pods a"
        f" phase, {rounds} rounds of the four phases interleaved, {clients} parallel clients,"
        f" keep-alive TLS, {time.strftime('%Y-%m-%d %H:%M')}; medians over the rounds"
    )
    print(f"{'':<30}{'pods/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'kube-apiserver CPU ms/pod':>27}")
    for phase in phases:
        print(
            f"{phase.name:<30}{phase.median('pods_per_s'):>9.0f}{phase.median('p50_ms'):>9.2f}"
            f"{phase.median('p99_ms'):>9.2f}{phase.cpu_median('kube-apiserver'):>27.2f}"
        )
    for phase in phases:
        rounds_text = "; ".join(
            f"p50 {r['p50_ms']:.2f} ms, kube-apiserver {c['kube-apiserver']:.2f} ms/pod"
            for r, c in zip(phase.results, phase.cpu, strict=True)
        )
        print(f"  {phase.name}, each round: {rounds_text}")
    base = none.median("p50_ms")
    for phase in (ours, conditions, peer):
        added = phase.median("p50_ms") - base
        print(
            f"{phase.name}: adds {added:+.2f} ms to the create p50 (+{added / base * 100:.0f} %),"
            f" kube-apiserver CPU {phase.cpu_median('kube-apiserver') - none.cpu_median('kube-apiserver'):+.2f} ms/pod"
        )
    added_ours, added_peer = ours.median("p50_ms") - base, peer.median("p50_ms") - base
    ratio = f"{added_ours / added_peer:.2f}x" if added_peer > 0 else "n/a (the Go peer added none)"
    print(
        f"this webhook/Go peer: p50 added {ratio}; kube-apiserver CPU a pod"
        f" {ours.cpu_median('kube-apiserver') - peer.cpu_median('kube-apiserver'):+.2f} ms;"
        f" webhook process CPU a pod {ours.cpu_median('webhook'):.2f} ms (Go peer"
        f" {peer.cpu_median('go-peer'):.2f} ms)"
    )
    beyond = ours.cpu_median("kube-apiserver") - conditions.cpu_median("kube-apiserver")
    call = peer.cpu_median("kube-apiserver") - none.cpu_median("kube-apiserver")
    print(
        f"kube-apiserver CPU a pod for calling this webhook, beyond evaluating its conditions:"
        f" {beyond:+.2f} ms; for calling the Go peer (no conditions): {call:+.2f} ms"
    )
    for phase in phases:
        extra = ", ".join(
            f"{name} {n}" for name, n in sorted(phase.other_requests.items(), key=lambda i: -i[1])
        )
        print(
            f"  requests kube-apiserver served besides the {phase.pods} pod creates"
            f" ({phase.name}): {extra or 'none'}; TCP connections accepted meanwhile"
            f" (the machine's, the clients' {clients} a round among them): {phase.accepted}"
        )


if __name__ == "__main__":
    main()
