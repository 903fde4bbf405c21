"""How fast a wave's evicted GPU pods come back when their claims come from templates, at
kube-controller-manager's default client QPS and at a raised one (issue 48, item 4).

    .venv/bin/python -m benchmarks.claims [--pods 1000] [--nodes 25] [--version 1.37]

For each setting (`--kube-api-qps 20 --kube-api-burst 30`, the defaults, then 200/300), a
fresh real control plane (etcd, kube-apiserver, kube-controller-manager with those flags,
kube-scheduler; DRAConsumableCapacity on) with `--nodes` GPU nodes publishing the HAMi
driver's ResourceSlice (tests/controlplane/gpu_node.py: two L4 and one A100 each; no kubelet,
so nothing starts) and the DeviceClass. A ReplicaSet of `--pods` replicas is created whose pod
template is a converted pod (`nvidia.com/gpu: 1, nvidia.com/gpumem: 1000` as the webhook
converts it, its ResourceClaimTemplate in place): what a wave's evictions ask of the
controllers, all at once. kube-controller-manager then writes, through one client and its
rate limiter, each pod (ReplicaSet controller), each claim and each pod's claim status
(resourceclaim controller); kube-scheduler allocates the claims and binds the pods.

Sampled every half second (as the admin, outside those limiters): pods created, claims
created, pods bound (claims allocated). Prints, per setting, the seconds until half and all of
each, and the rate. "Running" needs a kubelet: on the real node a pod started 1 to 3 s after
it was bound (tests/node); that part does not depend on these flags.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.apiserver import Creator
from benchmarks.scan import _fill
from hami_dra_webhook.core.outcome.decision import Converted
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from hami_dra_webhook.core.translate.pod import translate_pod
from tests.controlplane.build import build
from tests.controlplane.cluster import ControlPlane
from tests.controlplane.gpu_node import DRIVER, GpuNode
from tests.controlplane.versions import release

NAMESPACE = "wave"
SETTINGS = ((20, 30), (200, 300))  # kube-controller-manager's defaults, and raised


def _nodes(count: int) -> list[GpuNode]:
    base = GpuNode.default()
    return [GpuNode(f"gpu-{index:03d}", base.gpus) for index in range(count)]


def _replica_set(pods: int) -> tuple[dict[str, Any], dict[str, Any]]:
    legacy = {
        "metadata": {"labels": {"app": "wave"}},
        "spec": {
            "containers": [
                {
                    "name": "cuda",
                    "image": "nvidia/cuda:12.4.0-base-ubuntu22.04",
                    "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}},
                }
            ]
        },
    }
    decision = translate_pod(legacy, DEFAULT_POLICY, NAMESPACE)
    assert isinstance(decision, Converted), decision
    template = decision.apply(legacy)
    replica_set = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "wave"},
        "spec": {
            "replicas": pods,
            "selector": {"matchLabels": {"app": "wave"}},
            "template": template,
        },
    }
    return replica_set, decision.templates[0]


def _count(plane: ControlPlane, path: str, test: Any = None) -> int:
    status, body = plane.request("GET", path)
    if status != 200:
        raise RuntimeError(f"GET {path}: {status}")
    items = body.get("items") or []
    return sum(1 for item in items if test is None or test(item))


def _run(version: str, qps: int, burst: int, pods: int, nodes: int, limit: float) -> dict[str, Any]:
    target = release(version)
    with tempfile.TemporaryDirectory() as folder:
        plane = ControlPlane(
            target,
            build(target),
            Path(folder) / "plane",
            consumable_capacity=True,
            controller_manager_args=(f"--kube-api-qps={qps}", f"--kube-api-burst={burst}"),
        ).start()
        try:
            for node in _nodes(nodes):
                node.register(plane)
            creator = Creator(plane)
            device_class = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": DRIVER},
                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
            }
            namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
            _fill(creator, [("/apis/resource.k8s.io/v1/deviceclasses", device_class)], 1)
            _fill(creator, [("/api/v1/namespaces", namespace)], 1)
            deadline = time.monotonic() + 60
            while _count(plane, f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts") == 0:
                if time.monotonic() > deadline:
                    raise RuntimeError("no default ServiceAccount")
                time.sleep(0.2)
            replica_set, template = _replica_set(pods)
            templates = f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaimtemplates"
            _fill(creator, [(templates, template)], 1)
            started = time.monotonic()
            _fill(creator, [(f"/apis/apps/v1/namespaces/{NAMESPACE}/replicasets", replica_set)], 1)
            return _sample(plane, pods, started, limit)
        finally:
            plane.stop()


def _sample(plane: ControlPlane, pods: int, started: float, limit: float) -> dict[str, Any]:
    reached: dict[str, dict[str, float]] = {"pods": {}, "claims": {}, "bound": {}}
    while time.monotonic() - started < limit:
        counts = {
            "pods": _count(plane, f"/api/v1/namespaces/{NAMESPACE}/pods"),
            "claims": _count(
                plane, f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims"
            ),
            "bound": _count(
                plane,
                f"/api/v1/namespaces/{NAMESPACE}/pods",
                lambda p: bool(p["spec"].get("nodeName")),
            ),
        }
        now = time.monotonic() - started
        for what, count in counts.items():
            if count >= pods / 2:
                reached[what].setdefault("half", now)
            if count >= pods:
                reached[what].setdefault("all", now)
        if all("all" in r for r in reached.values()):
            break
        time.sleep(0.5)
    return reached


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=25)
    parser.add_argument("--version", default="1.37")
    parser.add_argument("--limit", type=float, default=600.0, help="seconds per setting")
    args = parser.parse_args()
    print(
        f"{args.pods} converted pods from one ReplicaSet, {args.nodes} GPU nodes, v{args.version}"
    )
    print(f"{'kcm qps/burst':<14} {'what':<8} {'half s':>8} {'all s':>8} {'per s':>8}")
    for qps, burst in SETTINGS:
        reached = _run(args.version, qps, burst, args.pods, args.nodes, args.limit)
        for what, times in reached.items():
            whole = times.get("all")
            rate = f"{args.pods / whole:8.1f}" if whole else "       -"
            half = f"{times['half']:8.1f}" if "half" in times else "       -"
            print(
                f"{f'{qps}/{burst}':<14} {what:<8} {half} "
                f"{(f'{whole:8.1f}' if whole else ' not yet')} {rate}"
            )


if __name__ == "__main__":
    main()
