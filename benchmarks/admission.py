"""Admission latency over one real TLS keep-alive connection, as kube-apiserver makes them.

Starts the webhook (`serve`) against the kube-apiserver stand-in of the tests, posts a ~8 KB
AdmissionReview of a Deployment pod with two GPU containers (its template is created on the
first request, then cached), and prints p50/p99/max and requests per second.

Run: .venv/bin/python -m benchmarks.admission [--requests 5000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.translate import realistic_pod
from tests.support.apiserver_standin import StandIn
from tests.support.reviews import review
from tests.support.webhook_process import Webhook


def run(requests: int) -> None:
    standin = StandIn().start()
    with tempfile.TemporaryDirectory() as folder:
        webhook = Webhook(
            Path(folder),
            "--kubeconfig",
            str(standin.kubeconfig(Path(folder))),
            "--log-level",
            "warning",
        )
        try:
            body = json.dumps(review(realistic_pod(1))).encode()
            connection = webhook.connection()
            for _ in range(200):  # warm-up: template creation, imports, caches
                status, answer = webhook.post(body, connection)
                assert status == 200 and answer["response"]["allowed"], answer
            samples = []
            started = time.perf_counter()
            for _ in range(requests):
                begin = time.perf_counter_ns()
                webhook.post(body, connection)
                samples.append(time.perf_counter_ns() - begin)
            elapsed = time.perf_counter() - started
            connection.close()
        finally:
            webhook.stop()
            standin.stop()
    samples.sort()
    ms = [s / 1e6 for s in samples]
    print(
        f"{requests} admissions of a {len(body) / 1024:.1f} KB review"
        " over one TLS keep-alive connection:"
    )
    print(
        f"  p50 {statistics.median(ms):.2f} ms, p99 {ms[int(len(ms) * 0.99)]:.2f} ms,"
        f" max {ms[-1]:.2f} ms, {requests / elapsed:.0f} requests/s (one client, sequential)"
    )
    print(f"  ResourceClaimTemplates the API stand-in holds afterwards: {len(standin.templates)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=5000)
    run(parser.parse_args().requests)
