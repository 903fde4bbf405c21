"""The node monitor on a node with 8 GPUs and 120 claims (issue 63): how long a scrape takes,
what the monitor holds in memory, the share of a core it uses at one scrape every 15 s with the
feedback loop every 5 s, and what it asks of kube-apiserver at idle, before and after many more
claims exist elsewhere in the cluster.

    .venv/bin/python -m benchmarks.node_monitor [--gpus 8] [--claims 120] [--others 1000]
        [--window 60] [--scrapes 30] [--version 1.37]

A full control plane (kube-scheduler allocates the claims) with a GPU node of `--gpus` 80 GiB
cards and no kubelet: `--claims` ResourceClaims of 1 GiB and 5 cores, two a pod (a node runs
at most 110 pods), placed on the node by kube-scheduler. Each claim's folder gets a region as
libvgpu.so writes it (one to three live slots: this process's PID stands for theirs, so every
slot counts), written sparse.
`hami-dra-webhook monitor` runs as a process under a ServiceAccount of its own (its requests
read from kube-apiserver's audit log) with the chart's RBAC. It prints the scrape time as the
client sees it (p50/p95 over `--scrapes` scrapes) and as the monitor measured its last one, the
monitor's RSS, its CPU seconds over `--window` seconds (a scrape every 15 s, the feedback loop
every 5 s) as a share of one core, and its API requests a minute over that window, before and
after `--others` claims are created in other namespaces.
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.apiserver import cpu_seconds
from benchmarks.quota_scale import audited, rss_mib
from hami_dra_webhook.core.region import layout
from tests.controlplane.build import build
from tests.controlplane.cluster import ControlPlane
from tests.controlplane.gpu_node import Gpu, GpuNode
from tests.controlplane.versions import release
from tests.monitor.conftest import fixture
from tests.monitor.monitor_process import MonitorProcess
from tests.support.cluster import Cluster, wait_for

NAMESPACE, ACCOUNT = "hami-system", "monitor"
USER = f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}"
DRIVER, CLASS = "hami-core-gpu.project-hami.io", "bench-monitor.hami.example"


def node_of(gpus: int) -> GpuNode:
    cards = tuple(
        Gpu(i, f"GPU-be{i:06x}-0000-4000-8000-{i:012x}", "NVIDIA A100-SXM4-80GB", 80, "Ampere", "8.0.0")
        for i in range(gpus)
    )  # fmt: skip
    return GpuNode("bench-gpu-node", cards)


def post(plane: ControlPlane, path: str, body: dict[str, Any]) -> dict[str, Any]:
    code, answer = plane.request("POST", path, body)
    assert code == 201, (path, code, answer)
    return dict(answer)


def setup(plane: ControlPlane, folder: Path) -> Path:
    """The monitor's ServiceAccount with the chart's rules; its kubeconfig."""
    post(plane, "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    post(plane, f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts", {"metadata": {"name": ACCOUNT}})
    rules = [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"], "verbs": ["list", "watch"]},
    ]  # fmt: skip
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    post(plane, f"{rbac}/clusterroles", {"metadata": {"name": "bench-monitor"}, "rules": rules})
    post(plane, f"{rbac}/clusterrolebindings", {
        "metadata": {"name": "bench-monitor"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "bench-monitor"},
        "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}],
    })  # fmt: skip
    post(plane, "/apis/resource.k8s.io/v1/deviceclasses", {
        "metadata": {"name": CLASS},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    })  # fmt: skip
    code, token = plane.request(
        "POST",
        f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{ACCOUNT}/token",
        {"spec": {"expirationSeconds": 7200}},
    )
    assert code == 201, token
    return plane.kubeconfig("bench-monitor", token=token["status"]["token"])


def claim_body(name: str, capacity: bool = True) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": CLASS}
    if capacity:
        exactly["capacity"] = {"requests": {"memory": "1Gi", "cores": "5"}}
    return {
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }


def pods_with_claims(plane: ControlPlane, count: int) -> list[tuple[str, str]]:
    """`count` claims, two a pod, placed on the GPU node; (claim UID, device) of each, once
    allocated."""
    namespace = "bench-gpu"
    post(plane, "/api/v1/namespaces", {"metadata": {"name": namespace}})
    wait_for(
        lambda: (
            plane.request("GET", f"/api/v1/namespaces/{namespace}/serviceaccounts/default")[0]
            == 200
        ),
        "the namespace's default ServiceAccount",
    )
    for index in range(count):
        path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
        post(plane, path, claim_body(f"c{index}"))
    for first in range(0, count, 2):  # a node runs at most 110 pods: two claims a pod
        names = [f"c{i}" for i in range(first, min(first + 2, count))]
        post(plane, f"/api/v1/namespaces/{namespace}/pods", {
            "metadata": {"name": f"p{first // 2}"},
            "spec": {
                "resourceClaims": [{"name": n, "resourceClaimName": n} for n in names],
                "containers": [
                    {"name": f"main-{n}", "image": "x", "resources": {"claims": [{"name": n}]}}
                    for n in names
                ],
            },
        })  # fmt: skip

    def allocated() -> list[dict[str, Any]] | None:
        code, claims = plane.request(
            "GET", f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
        )
        assert code == 200
        done = [c for c in claims["items"] if c.get("status", {}).get("reservedFor")]
        return done if len(done) == count else None

    return [
        (c["metadata"]["uid"], c["status"]["allocation"]["devices"]["results"][0]["device"])
        for c in wait_for(allocated, f"{count} claims allocated and reserved", timeout=600)
    ]


def write_regions(root: Path, claims: list[tuple[str, str]], node: GpuNode) -> None:
    """A sparse region per claim: fixture b's header and slots, its card's UUID, 1-3 slots."""
    source = fixture("b-two-processes-running").read_bytes()
    slot = source[layout.SLOTS_AT : layout.SLOTS_AT + layout.SLOT_SIZE]
    for index, (uid, device) in enumerate(claims):
        uuid = node.by_device(device).uuid
        slots = 1 + index % 3
        head = bytearray(source[: layout.SLOTS_AT])
        head[layout.UUIDS_AT : layout.UUIDS_AT + layout.UUID_SIZE] = uuid.encode().ljust(
            layout.UUID_SIZE, b"\0"
        )
        body = bytearray(slot * slots)
        for k in range(slots):
            struct.pack_into("<ii", body, k * layout.SLOT_SIZE, os.getpid(), os.getpid())
        tail = bytearray(source[layout.TAIL_AT : layout.TAIL_AT + layout.TAIL_SIZE])
        struct.pack_into("<i", tail, 0, slots)
        folder = root / uid
        folder.mkdir(parents=True)
        with (folder / f"region-{index}.cache").open("wb") as handle:
            handle.truncate(layout.REGION_SIZE + 1)
            handle.write(head + body)
            handle.seek(layout.TAIL_AT)
            handle.write(tail)


def scrape_seconds(monitor: MonitorProcess, count: int) -> list[float]:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        with urllib.request.urlopen(
            f"http://127.0.0.1:{monitor.port}/metrics", timeout=30
        ) as answer:
            answer.read()
        times.append(time.perf_counter() - started)
    return times


def window(
    plane: ControlPlane, monitor: MonitorProcess, seconds: float
) -> tuple[float, float, Counter[str]]:
    """CPU share of one core and requests a minute over `seconds`, a scrape every 15 s."""
    cpu, start = cpu_seconds(monitor.process.pid), time.time()
    while time.time() - start < seconds:
        monitor.scrape_text()
        time.sleep(min(15.0, max(0.0, seconds - (time.time() - start))))
    used = cpu_seconds(monitor.process.pid) - cpu
    found = audited(plane, start, USER)
    return used / seconds * 100, sum(found.values()) * 60 / seconds, found


def other_claims(plane: ControlPlane, count: int) -> None:
    """Claims in other namespaces, on no node of this monitor's (never allocated)."""
    for index in range(count):
        namespace = f"bench-other-{index // 100}"
        if index % 100 == 0:
            post(plane, "/api/v1/namespaces", {"metadata": {"name": namespace}})
        post(
            plane,
            f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims",
            claim_body(f"o{index}"),
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--claims", type=int, default=120)
    parser.add_argument("--others", type=int, default=1000)
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--scrapes", type=int, default=30)
    parser.add_argument("--version", default="1.37")
    args = parser.parse_args()
    target = release(args.version)
    folder = Path(f"/tmp/node-monitor-{time.time():.0f}")
    plane = ControlPlane(target, build(target), folder / "plane", consumable_capacity=True).start()
    monitor: MonitorProcess | None = None
    try:
        node = node_of(args.gpus)
        Cluster(plane, node, node.register(plane), folder)
        kubeconfig = setup(plane, folder)
        claims = pods_with_claims(plane, args.claims)
        root = folder / "claims"
        write_regions(root, claims, node)
        monitor = MonitorProcess(
            folder, root, "--kubeconfig", str(kubeconfig), "--node-name", node.name,
            "--feedback-interval", "5", "--log-level", "warning",
        )  # fmt: skip
        wait_for(
            lambda: (
                monitor is not None
                and monitor.scrape_text().count("hami_vgpu_memory_used_bytes{") >= args.claims
            ),
            f"the {args.claims} claims' series",
            timeout=120,
        )
        times = scrape_seconds(monitor, args.scrapes)
        own = next(s for s in monitor.scrape() if s[0] == "hami_dra_monitor_scrape_seconds")[2]
        series = monitor.scrape_text().count("\nhami_")
        cpu, requests, found = window(plane, monitor, args.window)
        rss = rss_mib(monitor.process.pid)
        other_claims(plane, args.others)
        cpu_after, requests_after, found_after = window(plane, monitor, args.window)
    finally:
        if monitor is not None:
            monitor.stop()
        plane.stop()
    p50, p95 = statistics.median(times), statistics.quantiles(times, n=20)[18]
    print(
        f"kube-apiserver {target.version}, {args.gpus} GPUs, {args.claims} claims,"
        f" {series} series, {time.strftime('%Y-%m-%d %H:%M')}"
    )
    print(
        f"scrape: p50 {p50 * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms (the monitor's own: {own * 1000:.1f} ms)"
    )
    print(f"RSS {rss:.1f} MiB; CPU {cpu:.2f}% of a core (a scrape every 15 s, feedback every 5 s)")
    print(f"API requests a minute at idle: {requests:.1f} {dict(found)}")
    print(
        f"after {args.others} more claims elsewhere: {requests_after:.1f} {dict(found_after)};"
        f" CPU {cpu_after:.2f}%"
    )


if __name__ == "__main__":
    main()
