"""What the workloads' preview (the ValidatingWebhookConfiguration of `kubectl apply` warnings)
costs kube-apiserver per workload created, measured through the real kube-apiserver.

    .venv/bin/python -m benchmarks.preview [--deployments 200] [--rounds 3] [--clients 4] [--version 1.36]

The control plane of benchmarks/apiserver.py (etcd and kube-apiserver only: no controller
makes ReplicaSets or pods, so the Deployment create is all that is measured), the chart
installed by helm, the webhook as a local process reached through the chart's webhook
configurations. Three phases, interleaved over the rounds so that the machine's drift falls on
all three, each in a namespace of its own:

- GPU Deployments, previewed: examples/deployment.yaml's shape (nvidia.com/gpu, gpumem,
  gpucores): kube-apiserver evaluates the matchConditions and calls the webhook, which answers
  with the warnings;
- GPU Deployments, not previewed: the same in a namespace labelled hami.io/webhook=ignore
  (the configurations' namespaceSelector leaves it out);
- CPU Deployments, conditions only: no legacy resource, in a previewed namespace: the
  matchConditions are evaluated, the webhook is not called.

It prints, as medians over the rounds, Deployments/s, the p50/p99 of the create call,
kube-apiserver's and the webhook's CPU per Deployment, and what the preview adds.
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path
from typing import Any

import yaml

from benchmarks.apiserver import Creator, Phase, namespace
from benchmarks.plane import bare_control_plane
from tests.controlplane.gpu_node import GpuNode
from tests.support.cluster import Cluster, Release

DEPLOYMENTS = "/apis/apps/v1/namespaces/{namespace}/deployments"
CREATED = "POST deployments"
EXAMPLE = Path(__file__).parents[1] / "examples" / "deployment.yaml"


def deployment(index: int, gpu: bool) -> dict[str, Any]:
    document: dict[str, Any] = copy.deepcopy(yaml.safe_load(EXAMPLE.read_text()))
    document["metadata"]["name"] = f"inference-{index:06d}"
    if not gpu:
        document["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {
            "cpu": "500m"
        }
    return document


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--deployments", type=int, default=200, help="a phase and round (200)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--version", default="1.36")
    args = parser.parse_args()
    with bare_control_plane(args.version) as (plane, folder):
        node = GpuNode.default()
        cluster = Cluster(plane, node, node.register(plane), folder)
        measure(cluster, args.deployments, args.rounds, args.clients, folder)


def measure(cluster: Cluster, count: int, rounds: int, clients: int, folder: Path) -> None:
    namespace(cluster, "hami-system")
    hami = Release(cluster, "hami-dra-webhook", "hami-system", sets=["driver.enabled=false"])
    hami.install()
    hami.start(folder / "webhook")
    creator = Creator(cluster.plane)
    previewed, skipped, conditions = (
        Phase("GPU Deployments, previewed"),
        Phase("GPU Deployments, not previewed"),
        Phase("CPU Deployments, conditions only"),
    )
    processes = {"webhook": hami.webhook.process.pid}
    warm = clients * 4
    for round_ in range(rounds):
        for phase, slug, gpu, labels in (
            (previewed, "gpu", True, {}),
            (skipped, "ignored", True, {"hami.io/webhook": "ignore"}),
            (conditions, "cpu", False, {}),
        ):
            target = namespace(cluster, f"preview-{slug}-{round_}", **labels)
            warmup = [deployment(900_000 + i, gpu) for i in range(warm)]
            creator.run(warmup, clients, target, DEPLOYMENTS)
            objects = [deployment(i, gpu) for i in range(count)]
            phase.measure(
                cluster, creator, objects, clients, target, processes, DEPLOYMENTS, CREATED
            )
        print(f"round {round_ + 1} of {rounds} done", flush=True)
    hami.stop()
    report((previewed, skipped, conditions), count, rounds, clients)


def report(phases: tuple[Phase, Phase, Phase], count: int, rounds: int, clients: int) -> None:
    previewed, skipped, conditions = phases
    print(
        f"\n{count} Deployments a phase and round, {rounds} rounds, {clients} clients;"
        " medians over the rounds"
    )
    print(
        f"{'phase':36} {'created/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'apiserver CPU ms':>17} {'webhook CPU ms':>15}"
    )
    for phase in phases:
        print(
            f"{phase.name:36} {phase.median('pods_per_s'):10.1f} {phase.median('p50_ms'):8.2f}"
            f" {phase.median('p99_ms'):8.2f} {phase.cpu_median('kube-apiserver'):17.3f}"
            f" {phase.cpu_median('webhook'):15.3f}"
        )
    for name, phase in (("previewed", previewed), ("conditions only", conditions)):
        p50 = phase.median("p50_ms") - skipped.median("p50_ms")
        cpu = phase.cpu_median("kube-apiserver") - skipped.cpu_median("kube-apiserver")
        print(
            f"{name} vs not previewed: p50 {p50:+.2f} ms, kube-apiserver CPU {cpu:+.3f} ms a Deployment"
        )
    for phase in phases:
        others = ", ".join(f"{k}: {v}" for k, v in sorted(phase.other_requests.items()))
        print(f"{phase.name}: other requests kube-apiserver served: {others or 'none'}")
    print("rounds:", [round(r["p50_ms"], 2) for r in previewed.results], "(previewed p50)")
    print("       ", [round(r["p50_ms"], 2) for r in skipped.results], "(not previewed p50)")


if __name__ == "__main__":
    main()
