"""A thousand GPU nodes across both pools: `migrate status`, `check`, `scan --cluster`, a wave
plan of 50 nodes and the webhook's memory, against a real kube-apiserver (issue 48, item 5).

    .venv/bin/python -m benchmarks.fleet [--nodes 1000] [--pods 20000] [--wave 50] [--version 1.37]

A real control plane (etcd and kube-apiserver built by tests/controlplane; no scheduler,
controller-manager or kubelet: the objects only have to exist, nothing runs) is filled by
parallel creates over keep-alive TLS:

- `--nodes` Ready GPU Nodes, half labelled `hami.io/gpu-pool=legacy` with 4 cards split 10
  ways (`nvidia.com/gpu: 40` allocatable, as HAMi's device plugin advertises them), half
  `hami.io/gpu-pool=dra`, each with the ResourceSlice the HAMi driver publishes for 4 cards
  (two 24 GiB L4, two 80 GiB A100: tests/controlplane/gpu_node.py);
- `--pods` GPU pods bound to them (`spec.nodeName`), owned by ReplicaSets, in 100 namespaces:
  on the legacy side `nvidia.com/gpu: 1, nvidia.com/gpumem: 2000`; on the DRA side the same
  pod as the webhook converts it, its ResourceClaimTemplate (one per namespace and shape, as
  the webhook writes them: 1,000 with the defaults), and a claim allocated to it on one of the node's cards with the
  capacity it consumes, reserved for the pod (what kube-controller-manager, the scheduler and
  the driver would leave; allocation is a stand-in here: no scheduler runs).

Then, each as a new process over the admin's kubeconfig: `migrate status -o json`, `check`,
`scan --cluster -A -o json`, `migrate wave --to dra -l <50 legacy nodes> --batch 50 --no-canary
--dry-run -o json` (the plan of one wave of 50 nodes: 1,000 evicted pods placed on what stays):
wall seconds and peak RSS (VmRSS every 20 ms). Last, the webhook (`serve`, with the chart's
default flags against this cluster): its RSS once ready and after its first full resync, and
one admission per namespace. Prints numbers; asserts nothing but that each command ran.
"""

from __future__ import annotations

import argparse
import gc
import json
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.apiserver import Creator
from benchmarks.plane import bare_control_plane
from benchmarks.scan import _fill, _rss_kib, measured_output
from hami_dra_webhook.core.outcome.decision import Converted
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from hami_dra_webhook.core.translate.pod import translate_pod
from tests.controlplane.cluster import ControlPlane
from tests.controlplane.gpu_node import DRIVER, Gpu
from tests.support.reviews import review
from tests.support.webhook_process import Webhook

NAMESPACES = [f"team-{index:03d}" for index in range(100)]
CARDS = (
    Gpu(0, "GPU-1c000000-0000-4000-8000-00000000000{n}", "NVIDIA L4", 24, "Ada Lovelace", "8.9.0"),
    Gpu(1, "GPU-1c000001-0000-4000-8000-00000000000{n}", "NVIDIA L4", 24, "Ada Lovelace", "8.9.0"),
    Gpu(
        2,
        "GPU-a1000002-0000-4000-8000-00000000000{n}",
        "NVIDIA A100-SXM4-80GB",
        80,
        "Ampere",
        "8.0.0",
    ),
    Gpu(
        3,
        "GPU-a1000003-0000-4000-8000-00000000000{n}",
        "NVIDIA A100-SXM4-80GB",
        80,
        "Ampere",
        "8.0.0",
    ),
)
SPLIT = 10  # HAMi's deviceSplitCount: nvidia.com/gpu allocatable is cards x 10
# gpumem (MiB) of a ReplicaSet's pods: 20 shapes, so each namespace has up to 20 templates
SHAPES = tuple(1000 + 200 * step for step in range(20))
WAVE_LABEL = "bench.example.com/wave"
MERGE = "application/merge-patch+json"


def _node(index: int, pool: str) -> dict[str, Any]:
    labels = {
        "kubernetes.io/hostname": f"gpu-{index:04d}",
        "kubernetes.io/os": "linux",
        "hami.io/gpu-pool": pool,
        "nvidia.com/gpu.present": "true",
    }
    if pool == "legacy":
        labels["gpu"] = "on"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"gpu-{index:04d}", "labels": labels},
    }


def _node_status(pool: str) -> dict[str, Any]:
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    if pool == "legacy":
        resources |= {"nvidia.com/gpu": str(len(CARDS) * SPLIT)}
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "stand-in status: no kubelet runs in the benchmark's control plane",
        "lastHeartbeatTime": "2026-01-01T00:00:00Z",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    return {"status": {"capacity": resources, "allocatable": resources, "conditions": [ready]}}


def _slice(node: str) -> dict[str, Any]:
    devices = []
    for card in CARDS:
        device = card.device()
        device["attributes"]["uuid"] = {"string": card.uuid.replace("{n}", node[-4:])}
        devices.append(device)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def _legacy_pod(index: int, node: str) -> dict[str, Any]:
    replica_set = f"rs-{index % 2000:04d}"
    shape = SHAPES[(index % 2000) // 100]  # one per ReplicaSet, rs-(index % 2000)
    limits = {"cpu": "1", "nvidia.com/gpu": "1", "nvidia.com/gpumem": str(shape)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"trainer-{index:06d}",
            "labels": {"app": replica_set},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": replica_set,
                    "uid": f"00000000-0000-4000-8000-{index % 2000:012d}",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "cuda",
                    "image": "nvidia/cuda:12.4.0-base-ubuntu22.04",
                    "command": ["sleep", "infinity"],
                    "resources": {"limits": limits},
                }
            ],
        },
    }


def _replica_sets(nodes: int, pods: int) -> list[tuple[str, dict[str, Any]]]:
    """The pods' owners (pod i belongs to rs-(i % 2000), in namespace i % 100): each with the
    legacy pod template, as its Deployment wrote it (the pods on the DRA side were converted at
    admission; their owner's template was not)."""
    sets = []
    for index in range(min(2000, pods)):
        template = _legacy_pod(index, "")
        name = template["metadata"]["ownerReferences"][0]["name"]
        del template["metadata"]["ownerReferences"], template["spec"]["nodeName"]
        template["metadata"].pop("name")
        body = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": name, "labels": {"app": name}},
            "spec": {
                "replicas": max(1, pods // 2000),
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": template["metadata"], "spec": template["spec"]},
            },
        }
        namespace = NAMESPACES[index % len(NAMESPACES)]
        sets.append((f"/apis/apps/v1/namespaces/{namespace}/replicasets", body))
    return sets


def _converted(index: int, node: str, namespace: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pod as the webhook converts it, and the template it names."""
    pod = _legacy_pod(index, "")
    decision = translate_pod(pod, DEFAULT_POLICY, namespace)
    assert isinstance(decision, Converted), decision
    converted = decision.apply(pod)
    converted["spec"]["nodeName"] = node
    return converted, decision.templates[0]


def _claim(pod: dict[str, Any], template: dict[str, Any], node: str, card: int) -> dict[str, Any]:
    entry = pod["spec"]["resourceClaims"][0]
    metadata = {
        "name": f"{pod['metadata']['name']}-{entry['name']}",
        "annotations": {"resource.kubernetes.io/pod-claim-name": entry["name"]},
        "labels": dict((template["spec"].get("metadata") or {}).get("labels") or {}),
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": metadata,
        "spec": template["spec"]["spec"],
    }


def _allocation(claim: dict[str, Any], pod: dict[str, Any], node: str, card: int) -> dict[str, Any]:
    request = claim["spec"]["devices"]["requests"][0]
    asked = (request.get("exactly") or {}).get("capacity", {}).get("requests") or {}
    result = {
        "request": request["name"],
        "driver": DRIVER,
        "pool": node,
        "device": f"hami-gpu-{card}",
        "shareID": f"00000000-0000-4000-8000-{abs(hash(claim['metadata']['name'])) % 10**12:012d}",
        "consumedCapacity": {k: v for k, v in asked.items()},
    }
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    status = {
        "allocation": {
            "devices": {"results": [result]},
            "nodeSelector": {"nodeSelectorTerms": [term]},
        },
        "reservedFor": [
            {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
        ],
    }
    return {**claim, "status": status}


def fill(plane: ControlPlane, nodes: int, pods: int, clients: int) -> dict[str, str]:
    """The fleet; returns each node's pool."""
    creator = Creator(plane)
    started = time.perf_counter()
    namespaces = [
        ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}})
        for n in NAMESPACES
    ]
    _fill(creator, namespaces, clients)
    accounts = [
        (
            f"/api/v1/namespaces/{n}/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
        )
        for n in NAMESPACES
    ]
    _fill(creator, accounts, clients)
    pools = {f"gpu-{i:04d}": ("legacy" if i % 2 == 0 else "dra") for i in range(nodes)}
    wave = [name for name, pool in pools.items() if pool == "legacy"][:50]
    bodies = []
    for i, (name, pool) in enumerate(pools.items()):
        body = _node(i, pool)
        if name in wave:
            body["metadata"]["labels"][WAVE_LABEL] = "w0"
        bodies.append(("/api/v1/nodes", body))
    _fill(creator, bodies, clients)
    _run_calls(
        creator,
        [("PATCH", f"/api/v1/nodes/{n}/status", _node_status(p), MERGE) for n, p in pools.items()]
        + [("PATCH", f"/api/v1/nodes/{n}", {"spec": {"taints": None}}, MERGE) for n in pools],
        clients,
    )
    slices = [
        ("/apis/resource.k8s.io/v1/resourceslices", _slice(n))
        for n, p in pools.items()
        if p == "dra"
    ]
    _fill(creator, slices, clients)
    print(f"{nodes} nodes and {len(slices)} ResourceSlices: {time.perf_counter() - started:.0f} s")
    started = time.perf_counter()
    names = list(pools)
    legacy_jobs, converted_jobs = [], []
    templates: dict[tuple[str, str], dict[str, Any]] = {}
    for index in range(pods):
        node = names[index % len(names)]
        namespace = NAMESPACES[index % len(NAMESPACES)]
        if pools[node] == "legacy":
            legacy_jobs.append((f"/api/v1/namespaces/{namespace}/pods", _legacy_pod(index, node)))
            continue
        pod, template = _converted(index, node, namespace)
        templates[(namespace, template["metadata"]["name"])] = template
        converted_jobs.append((namespace, pod, template, node, (index // len(names)) % len(CARDS)))
    _fill(
        creator,
        [
            (f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates", template)
            for (ns, _), template in templates.items()
        ],
        clients,
    )
    _fill(creator, _replica_sets(len(names), pods), clients)
    _fill(creator, legacy_jobs, clients)
    _place_converted(creator, converted_jobs, clients)
    print(
        f"{len(legacy_jobs)} legacy pods, {len(converted_jobs)} converted pods with allocated"
        f" claims, {len(templates)} templates: {time.perf_counter() - started:.0f} s"
    )
    return pools


Call = tuple[str, str, Any, str]  # method, path, body, content type


def _in_parallel(creator: Creator, shares: list[Any], work: Any, clients: int) -> None:
    """`work(connection, item)` for every item, `clients` threads each over its own
    keep-alive TLS connection; the first failure raised once all have ended."""
    failures: list[str] = []

    def worker(share: list[Any]) -> None:
        connection = creator.connection()
        try:
            for item in share:
                work(connection, item)
        except Exception as error:  # reported below
            failures.append(str(error))
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(shares[i::clients],)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise RuntimeError(failures[0])


def _send(connection: Any, call: Call) -> Any:
    method, path, body, kind = call
    connection.request(method, path, body=json.dumps(body).encode(), headers={"Content-Type": kind})
    answer = connection.getresponse()
    raw = answer.read()
    if answer.status >= 300:
        raise RuntimeError(f"{method} {path}: {answer.status} {raw[:300]!r}")
    return json.loads(raw)


def _run_calls(creator: Creator, calls: list[Call], clients: int) -> None:
    _in_parallel(creator, calls, _send, clients)


def _place_converted(
    creator: Creator, jobs: list[tuple[str, dict[str, Any], dict[str, Any], str, int]], clients: int
) -> None:
    """Each converted pod: the pod, its claim, and the claim's allocation and reservation."""
    kind = "application/json"

    def place(connection: Any, job: tuple[str, dict[str, Any], dict[str, Any], str, int]) -> None:
        namespace, pod, template, node, card = job
        stored = _send(connection, ("POST", f"/api/v1/namespaces/{namespace}/pods", pod, kind))
        claims = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
        claim = _send(connection, ("POST", claims, _claim(stored, template, node, card), kind))
        status = f"{claims}/{claim['metadata']['name']}/status"
        _send(connection, ("PUT", status, _allocation(claim, stored, node, card), kind))

    _in_parallel(creator, jobs, place, clients)


def _command(label: str, *args: str) -> tuple[str, float, float, int, str]:
    """Run the CLI as a new process (benchmarks.scan.measured_output): the label, wall seconds,
    peak RSS in MiB, exit code, stdout."""
    wall, peak, code, text, said = measured_output(*args)
    if code not in (0, 1, 2):
        raise RuntimeError(f"{label}: exit {code}: {said[-500:]}")
    return label, wall, peak, code, text


def _saw(label: str, text: str) -> str:
    """What a command's output says it saw: the proof that it read the fleet."""
    if label.startswith("migrate status"):
        data = json.loads(text)
        pools = data["pools"]
        sides = [e for e in data["namespaces"].values()]
        return (
            f"{pools['legacy']['nodes']} legacy nodes, {pools['dra']['nodes']} DRA nodes,"
            f" {sum(e['legacy'] for e in sides)} legacy and {sum(e['converted'] for e in sides)}"
            f" converted pods, {pools['dra']['memoryFreeMiB']} MiB free on DRA"
        )
    if label.startswith("migrate wave"):
        data = json.loads(text)
        plan = [step for wave in data["previews"] for step in wave]
        return (
            f"{sum(len(w['nodes']) for w in data['fleet']['waves'])} nodes in"
            f" {len(data['fleet']['waves'])} wave(s), {len(plan)} pods planned,"
            f" {sum(1 for s in plan if not s['fits'])} fit nowhere"
        )
    if label.startswith("scan"):
        data = json.loads(text)
        totals: dict[str, int] = {}
        for counts in data["summary"].values():
            for outcome, number in counts.items():
                totals[outcome] = totals.get(outcome, 0) + number
        return f"{len(data['workloads'])} workloads: {totals}"
    marks = [line.split()[0] for line in text.splitlines() if line.split()]
    return ", ".join(f"{marks.count(m)} {m}" for m in ("OK", "WARN", "FAIL") if m in marks)


def webhook_memory(plane: ControlPlane, folder: Path, resync_wait: float) -> list[str]:
    """The webhook against the fleet: RSS once ready, after a full resync, after admissions."""
    webhook = Webhook(folder / "webhook", f"--kubeconfig={plane.admin_kubeconfig}", "--gpu-quota")
    try:
        pid = webhook.process.pid
        lines = [f"webhook ready: RSS {_rss_kib(pid) / 1024:.0f} MiB"]
        peak, end = 0, time.monotonic() + resync_wait
        while time.monotonic() < end:
            peak = max(peak, _rss_kib(pid))
            time.sleep(0.05)
        lines.append(
            f"webhook after {resync_wait:.0f} s (a full resync): peak RSS {peak / 1024:.0f} MiB"
        )
        connection = webhook.connection()
        latencies = []
        for index, namespace in enumerate(NAMESPACES):
            body = review(_legacy_pod(10**6 + index, ""), namespace=namespace)
            started = time.perf_counter()
            status, _ = webhook.post(body, connection)
            latencies.append(time.perf_counter() - started)
            if status != 200:
                raise RuntimeError(f"admission answered {status}")
            peak = max(peak, _rss_kib(pid))
        latencies.sort()
        lines.append(
            f"webhook after {len(NAMESPACES)} admissions (one per namespace): peak RSS"
            f" {peak / 1024:.0f} MiB, p50 {latencies[len(latencies) // 2] * 1000:.1f} ms,"
            f" max {latencies[-1] * 1000:.1f} ms"
        )
        return lines
    finally:
        webhook.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=20_000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--version", default="1.37")
    parser.add_argument("--resync-wait", type=float, default=35.0)
    args = parser.parse_args()
    with bare_control_plane(args.version) as (plane, folder):
        fill(plane, args.nodes, args.pods, args.clients)
        gc.collect()
        kubeconfig = ("--kubeconfig", str(plane.admin_kubeconfig))
        rows = [
            _command("migrate status -o json", "migrate", "status", *kubeconfig, "-o", "json"),
            _command("check", "check", *kubeconfig),
            _command(
                "scan --cluster -A -o json", "scan", "--cluster", "-A", *kubeconfig, "-o", "json"
            ),
            _command(
                "migrate wave: plan of 50 nodes",
                *("migrate", "wave", "--to", "dra", "-l", f"{WAVE_LABEL}=w0", "--batch", "50"),
                *("--no-canary", "--dry-run", "-o", "json", *kubeconfig),
            ),
        ]
        print(f"\n{'command':<34} {'seconds':>8} {'peak RSS MiB':>13} {'exit':>5}  saw")
        for label, wall, peak, code, text in rows:
            print(f"{label:<34} {wall:8.1f} {peak:13.0f} {code:5d}  {_saw(label, text)}")
        print()
        for line in webhook_memory(plane, folder, args.resync_wait):
            print(line)


if __name__ == "__main__":
    main()
