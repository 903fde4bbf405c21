"""Garbage collection in the serving process, with tenants' templates under the webhook's labels
(issue 34, finding 2: where the collector should run is decided on these numbers).

    .venv/bin/python -m benchmarks.gc_tenants [--templates 100] [--seconds 40] [--version 1.37]

A real control plane (etcd and kube-apiserver) holds `--templates` ResourceClaimTemplates of a
tenant, each labelled as the webhook's and ~3 MB as served (~500 KB of `&` in CEL selectors,
which kube-apiserver serves as `\\u0026`), plus one of the webhook's own in another namespace.
The webhook runs as a process of its own, first with a collection every 2 seconds (grace 1 s,
so every tenant template is a candidate it verifies), then without collection; meanwhile one
client sends the same GPU pod's admission review without pause (answered from the template
cache: what a pass costs other tenants is the time it holds the event loop). Prints the RSS
(sampled every 20 ms) and the admission latencies of both runs; asserts nothing.
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.apiserver import Creator
from benchmarks.plane import bare_control_plane
from tests.controlplane.cluster import ControlPlane
from tests.support.reviews import replica_pod, review
from tests.support.tenants import squatting_template
from tests.support.webhook_process import Webhook

TENANT, OTHER = "tenant", "other"


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _fill(plane: ControlPlane, count: int) -> None:
    creator = Creator(plane)
    connection = creator.connection()
    for name in (TENANT, OTHER):
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        creator.create(connection, "/api/v1/namespaces", body)
    path = f"/apis/resource.k8s.io/v1/namespaces/{TENANT}/resourceclaimtemplates"
    for index in range(count):
        template = squatting_template(f"hami-gpu-tenant-{index:04d}", spec_bytes=500_000)
        creator.create(connection, path, template)
    connection.close()


def _run(plane: ControlPlane, folder: Path, seconds: float, gc_interval: float) -> None:
    webhook = Webhook(
        folder,
        f"--kubeconfig={plane.admin_kubeconfig}",
        f"--gc-interval={gc_interval}",
        "--gc-grace=1",
        "--cache-ttl=0.25",
    )
    try:
        connection = webhook.connection()
        body = review(
            replica_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}), namespace=OTHER
        )
        status, _ = webhook.post(body, connection)  # creates the template; then cache hits
        assert status == 200
        pid = webhook.process.pid
        base = _rss_kib(pid)
        latencies: list[float] = []
        peak, sampled = base, time.monotonic()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            started = time.perf_counter()
            status, _ = webhook.post(body, connection)
            latencies.append(time.perf_counter() - started)
            if status != 200:
                raise RuntimeError(f"admission answered {status}")
            if time.monotonic() - sampled > 0.02:
                peak, sampled = max(peak, _rss_kib(pid)), time.monotonic()
        passes = webhook.log().count("template garbage collection:")
        latencies.sort()
        ms = [x * 1000 for x in latencies]
        what = f"gc every {gc_interval:g} s" if gc_interval else "no gc"
        print(
            f"{what}: {passes} passes in {seconds:g} s; RSS {base / 1024:.1f} MiB at start,"
            f" peak {peak / 1024:.1f} MiB; {len(ms)} admissions: p50"
            f" {statistics.median(ms):.2f} ms, p99 {ms[int(len(ms) * 0.99)]:.2f} ms,"
            f" max {ms[-1]:.1f} ms",
            flush=True,
        )
    except (OSError, http.client.HTTPException) as error:
        print(f"failed: {error}\n{webhook.log_tail()}")
        raise
    finally:
        webhook.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--templates", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--version", default="1.37")
    args = parser.parse_args()
    with bare_control_plane(args.version) as (plane, scratch):
        started = time.monotonic()
        _fill(plane, args.templates)
        print(
            f"{args.templates} tenant templates of ~3 MB as served, created in"
            f" {time.monotonic() - started:.1f} s",
            flush=True,
        )
        with tempfile.TemporaryDirectory(dir=scratch) as temp:
            _run(plane, Path(temp) / "with", args.seconds, gc_interval=2.0)
            _run(plane, Path(temp) / "without", args.seconds, gc_interval=0.0)


if __name__ == "__main__":
    main()
