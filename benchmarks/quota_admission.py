"""What a GPU quota adds to pod creation, measured through the real kube-apiserver (issue 47).

    .venv/bin/python -m benchmarks.quota_admission [--pods 300] [--rounds 3] [--clients 8]
        [--version 1.36]

The control plane, chart and webhook of benchmarks/apiserver.py (no scheduler or
controller-manager). Two phases, interleaved over the rounds, each in a namespace of its own:

- no quota: legacy pods (nvidia.com/gpu: 1, nvidia.com/gpumem: 3000), converted on the way in;
- a GPU quota: the same pods where a ResourceQuota names limits.nvidia.com/gpumem (hard far
  above what the phase asks, so none would wait): kube-apiserver also calls the gate webhook
  (its namespace is labelled) and evaluates the `<release>-gpu-quota` policy with the quota as
  its parameter; each pod is created held by the gate.

It prints the create call's p50/p99, pods/s and kube-apiserver's CPU a pod for each, and what
the quota adds. (Without kube-controller-manager no claim is made, so the pods stay held here:
the time to release is measured on the full control plane, tests/e2e/test_gpu_quotas.py.)
"""

from __future__ import annotations

import argparse
import time

from benchmarks.apiserver import Creator, Phase, legacy_pod, namespace
from benchmarks.plane import bare_control_plane
from hami_dra_webhook.core.quota.gpu_quota import NAMESPACE_LABEL
from tests.controlplane.gpu_node import GpuNode
from tests.support.cluster import Cluster, Release, wait_for


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=300, help="pods a phase and round (300)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--version", default="1.36")
    parser.add_argument(
        "--off",
        action="store_true",
        help="install with gpuQuota.enabled=false and run the no-quota phase only: what the"
        " feature costs namespaces without a quota",
    )
    args = parser.parse_args()
    with bare_control_plane(args.version) as (plane, folder):
        node = GpuNode.default()
        cluster = Cluster(plane, node, node.register(plane), folder)
        namespace(cluster, "hami-system")
        sets = ["driver.enabled=false"] + (["gpuQuota.enabled=false"] if args.off else [])
        hami = Release(cluster, "hami-dra-webhook", "hami-system", sets=sets)
        hami.install()
        hami.start(folder / "webhook")
        assert hami.webhook is not None
        creator = Creator(cluster.plane)
        plain, quota = Phase("no quota"), Phase("a GPU quota")
        processes = {"webhook": hami.webhook.process.pid}
        warm = [legacy_pod(900_000 + i) for i in range(args.clients * 4)]
        for round_ in range(args.rounds):
            target = namespace(cluster, f"bench-plain-{round_}")
            creator.run(warm, args.clients, target)
            pods = [legacy_pod(i) for i in range(args.pods)]
            plain.measure(cluster, creator, pods, args.clients, target, processes)
            if args.off:
                continue
            held = namespace(cluster, f"bench-quota-{round_}")
            limit = {"hard": {"limits.nvidia.com/gpumem": str(10**9)}}
            body = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu"}}
            cluster.apply({**body, "spec": limit}, namespace=held)
            wait_for(
                lambda ns=held: (
                    cluster.get("namespace", ns)["metadata"].get("labels", {}).get(NAMESPACE_LABEL)
                ),
                "the quota namespace labelled",
            )
            creator.run(warm, args.clients, held)
            quota.measure(cluster, creator, pods, args.clients, held, processes)
        if not args.off:
            gated = cluster.pods(f"bench-quota-{args.rounds - 1}")
            assert all(p["spec"].get("schedulingGates") for p in gated), "pods were not held"
        hami.stop()
    print(
        f"kube-apiserver {plane.release.version}, {args.pods} pods a phase, {args.rounds} rounds,"
        f" {args.clients} clients, {time.strftime('%Y-%m-%d %H:%M')}; medians over the rounds"
    )
    print(f"{'':<14}{'pods/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'kube-apiserver CPU ms/pod':>27}")
    if args.off:
        plain.name = "gpuQuota off"
    for phase in (plain,) if args.off else (plain, quota):
        print(
            f"{phase.name:<14}{phase.median('pods_per_s'):>9.0f}{phase.median('p50_ms'):>9.2f}"
            f"{phase.median('p99_ms'):>9.2f}{phase.cpu_median('kube-apiserver'):>27.2f}"
        )
    if args.off:
        return
    added = quota.median("p50_ms") - plain.median("p50_ms")
    added_99 = quota.median("p99_ms") - plain.median("p99_ms")
    cpu = quota.cpu_median("kube-apiserver") - plain.cpu_median("kube-apiserver")
    print(
        f"a GPU quota adds {added:+.2f} ms to the p50, {added_99:+.2f} ms to the p99,"
        f" {cpu:+.2f} ms of kube-apiserver CPU a pod"
    )


if __name__ == "__main__":
    main()
