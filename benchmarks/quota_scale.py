"""The GPU quota work at scale, on the real control plane (issue 62): what the chart's two
replicas ask of kube-apiserver while nothing changes, and how soon a held pod is released
after a pod of its namespace ends.

    .venv/bin/python -m benchmarks.quota_scale [--namespaces 10,100,300] [--pods 10]
        [--held 100] [--samples 20] [--window 60] [--version 1.37]

A full control plane (kube-scheduler and kube-controller-manager: the converted pods' claims
are made from their templates) with the chart installed and two webhook processes under its
ServiceAccount, as the chart runs its two replicas. For each count of quota namespaces (added
to those of the count before): each namespace gets a `limits.nvidia.com/gpumem` quota that its
`--pods` legacy pods of 1000 MiB (converted on the way in, never scheduled: no node matches)
just fit; once all are released, `--held` more pods spread over the namespaces wait over their
quotas. It prints, from kube-apiserver's audit log (the ServiceAccount's requests, each once):
requests a minute over `--window` seconds idle without and with the held pods; then the release
after a delete (a released pod force-deleted; the time until a held pod of its namespace has no
gate), p50/p95 over `--samples`; and the two replicas' CPU seconds a minute idle and resident
memory.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.apiserver import Creator, cpu_seconds, legacy_pod
from tests.controlplane.build import build
from tests.controlplane.cluster import ControlPlane
from tests.controlplane.gpu_node import GpuNode
from tests.controlplane.versions import release
from tests.support.cluster import Cluster, Release, wait_for
from tests.support.webhook_process import Webhook

ACCOUNT = "system:serviceaccount:hami-system:hami-dra-webhook"
GATE = "hami.io/gpu-quota"


def audited(plane: ControlPlane, since: float, account: str = ACCOUNT) -> Counter[str]:
    """`account`'s requests since `since` (epoch seconds), by verb and resource (the webhook's
    by default)."""
    seen: dict[str, str] = {}
    for line in plane.audit_log.read_text().splitlines():
        event = json.loads(line)
        if event.get("user", {}).get("username") != account:
            continue
        stamp = event.get("requestReceivedTimestamp", "")
        when = time.mktime(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
        if when < since:
            continue
        ref = event.get("objectRef", {})
        seen[event["auditID"]] = f"{event['verb']} {ref.get('resource', '?')}"
    return Counter(seen.values())


def is_gated(pod: dict[str, Any]) -> bool:
    return any(g["name"] == GATE for g in pod["spec"].get("schedulingGates") or [])


def listed(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    code, answer = cluster.plane.request("GET", f"/api/v1/namespaces/{namespace}/pods")
    assert code == 200, answer
    return list(answer["items"])


def gated(cluster: Cluster, namespace: str, name: str) -> bool:
    code, pod = cluster.plane.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    return code == 200 and is_gated(pod)


def namespace(cluster: Cluster, name: str) -> str:
    """A namespace (kube-controller-manager gives it its default ServiceAccount)."""
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    code, answer = cluster.plane.request("POST", "/api/v1/namespaces", body)
    assert code in (201, 409), answer
    account = f"/api/v1/namespaces/{name}/serviceaccounts/default"
    wait_for(lambda: cluster.plane.request("GET", account)[0] == 200 or None, f"{account}")
    return name


def pods_of(index: int, count: int, first: int = 0) -> list[dict[str, Any]]:
    pods = []
    for n in range(first, first + count):
        pod = legacy_pod(index * 1000 + n)
        pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem"] = "1000"
        pods.append(pod)
    return pods


def fill(cluster: Cluster, creator: Creator, made: list[str], target: int, pods: int) -> None:
    """Quota namespaces up to `target`, each with `pods` released pods that fit it."""
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu"}}
    quota["spec"] = {"hard": {"limits.nvidia.com/gpumem": str(pods * 1000)}}
    while len(made) < target:
        name = namespace(cluster, f"tenant-{len(made):04d}")
        creator.run([quota], 1, name, "/api/v1/namespaces/{namespace}/resourcequotas")
        made.append(name)
        creator.run(pods_of(len(made), pods), 4, name)
    for name in made:
        wait_for(
            lambda n=name: (
                (len(found := listed(cluster, n)) >= pods and not any(map(is_gated, found))) or None
            ),
            f"the pods of {name} released",
            timeout=600,
        )


def idle(
    plane: ControlPlane, window: float, replicas: list[Webhook]
) -> tuple[float, Counter[str], float]:
    """Requests a minute, what they were, and the replicas' CPU seconds a minute."""
    cpu = sum(cpu_seconds(r.process.pid) for r in replicas)
    start = time.time()
    time.sleep(window)
    used = sum(cpu_seconds(r.process.pid) for r in replicas) - cpu
    found = audited(plane, start)
    return sum(found.values()) * 60 / window, found, used * 60 / window


def releases(cluster: Cluster, spread: list[str], samples: int) -> list[float]:
    """Seconds from a released pod's delete to a held pod of its namespace released."""
    found = []
    for sample in range(samples):
        name = spread[sample % len(spread)]
        pods = listed(cluster, name)
        waiting = [p["metadata"]["name"] for p in pods if is_gated(p)]
        running = [p["metadata"]["name"] for p in pods if not is_gated(p)]
        if not waiting or not running:
            continue
        started = time.monotonic()
        cluster.plane.request(
            "DELETE", f"/api/v1/namespaces/{name}/pods/{running[0]}", {"gracePeriodSeconds": 0}
        )
        wait_for(
            lambda n=name, w=waiting: any(not gated(cluster, n, p) for p in w) or None,
            "a held pod released",
            timeout=60,
        )
        found.append(time.monotonic() - started)
    return found


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


Row = tuple[int, float, float, float, float, float, float, list[float]]


def row(
    cluster: Cluster,
    creator: Creator,
    made: list[str],
    args: argparse.Namespace,
    replicas: list[Webhook],
    number: int,
) -> Row:
    """One row: idle, then with the held pods, the releases, the replicas' memory; the held
    pods deleted afterwards (the pods the samples deleted are not made again: each namespace
    keeps room for as many as were released)."""
    plane = cluster.plane
    quiet, what, cpu = idle(plane, args.window, replicas)
    spread = [made[i % len(made)] for i in range(args.held)]
    for i, name in enumerate(spread):  # named apart from every row's pods
        index = args.pods + 100 * number + i
        creator.run(pods_of(made.index(name) + 1, 1, first=index), 1, name)
    # Each counted and told (an Event), its claim made by kube-controller-manager: then
    # nothing changes any more.
    time.sleep(30)
    with_held, held_what, held_cpu = idle(plane, args.window, replicas)
    latency = sorted(releases(cluster, sorted(set(spread)), args.samples))
    p50 = statistics.median(latency)
    p95 = latency[min(len(latency) - 1, round(0.95 * (len(latency) - 1)))]
    memory = [rss_mib(r.process.pid) for r in replicas]
    print(f"{len(made)} namespaces: idle {dict(what)}; with held pods {dict(held_what)}")
    for name in sorted(set(spread)):
        for pod in listed(cluster, name):
            if is_gated(pod):
                plane.request(
                    "DELETE",
                    f"/api/v1/namespaces/{name}/pods/{pod['metadata']['name']}",
                    {"gracePeriodSeconds": 0},
                )
    return (len(made), quiet, with_held, p50, p95, cpu, held_cpu, memory)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--namespaces", default="10,100,300")
    parser.add_argument("--pods", type=int, default=10)
    parser.add_argument("--held", type=int, default=100)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--version", default="1.37")
    args = parser.parse_args()
    counts = [int(n) for n in args.namespaces.split(",")]
    target = release(args.version)
    folder = Path(f"/tmp/quota-scale-{time.time():.0f}")
    plane = ControlPlane(target, build(target), folder / "plane", consumable_capacity=True).start()
    rows: list[Row] = []
    started: list[Webhook] = []
    try:
        node = GpuNode.default()
        cluster = Cluster(plane, node, node.register(plane), folder)
        namespace(cluster, "hami-system")
        hami = Release(cluster, "hami-dra-webhook", "hami-system", sets=["driver.enabled=false"])
        hami.install()
        first = hami.start(folder / "webhook")
        started.append(first)
        second = hami.replica(folder / "second")
        started.append(second)
        replicas = [first, second]
        creator = Creator(plane)
        made: list[str] = []
        for count in counts:
            fill(cluster, creator, made, count, args.pods)
            rows.append(row(cluster, creator, made, args, replicas, len(rows) + 1))
    finally:
        for replica in started:
            replica.stop()
        plane.stop()
    print(
        f"kube-apiserver {target.version}, two replicas, {args.pods} pods a namespace,"
        f" {args.held} held, {time.strftime('%Y-%m-%d %H:%M')}"
    )
    print(
        f"{'quota namespaces':>17}{'req/min idle':>14}{'with held':>11}{'release p50':>13}"
        f"{'p95':>8}{'CPU s/min idle':>16}{'with held':>11}{'RSS MiB':>16}"
    )
    for count, quiet, with_held, p50, p95, cpu, held_cpu, memory in rows:
        print(
            f"{count:>17}{quiet:>14.0f}{with_held:>11.0f}{p50:>12.2f}s{p95:>7.2f}s"
            f"{cpu:>16.2f}{held_cpu:>11.2f}{'/'.join(f'{m:.0f}' for m in memory):>16}"
        )


if __name__ == "__main__":
    main()
