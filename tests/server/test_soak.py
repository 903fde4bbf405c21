"""Load and soak: many admissions through the real process, a certificate rotation in the middle.

HAMI_SOAK_REQUESTS admissions (3,000 by default, as in CI; set 100000 for the long run) over four
keep-alive TLS connections against the kube-apiserver stand-in. Measured: failures (must be 0),
server RSS after warm-up and at the end (must stay flat), and p99 latency of the first and last
quarter (must stay stable). The figures are printed (pytest -s shows them).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from cryptography import x509

from hami_dra_webhook.certs.pki import issue
from tests.support.attack import rss_mib
from tests.support.cluster import Cluster
from tests.support.reviews import replica_pod, review
from tests.support.webhook_process import Webhook, served_serial

pytestmark = pytest.mark.plane  # the shared control plane (tests/conftest.py)

REQUESTS = int(os.environ.get("HAMI_SOAK_REQUESTS", "3000"))
CLIENTS = 4


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[int(len(ordered) * 0.99)]


def _quarters(latencies: list[list[float]]) -> tuple[list[float], list[float]]:
    quarter = REQUESTS // CLIENTS // 4
    return [v for per in latencies for v in per[:quarter]], [
        v for per in latencies for v in per[-quarter:]
    ]


def _wait_for_half(done: list[int]) -> None:
    """Until half the admissions are answered; at 50 a second, the slowest ever seen, at most."""
    deadline = time.monotonic() + max(60.0, REQUESTS / 50)
    while done[0] < REQUESTS // 2:
        assert time.monotonic() < deadline, f"only {done[0]} of {REQUESTS} admissions answered"
        time.sleep(0.05)


@pytest.mark.timed  # it measures under load, or holds a time bound: alone
def test_soak_with_rotation(kube: Cluster, tmp_path: Path) -> None:
    kube.empty_namespace("team-a")
    webhook = Webhook(
        tmp_path,
        "--kubeconfig",
        str(kube.plane.admin_kubeconfig),
        "--gc-interval",
        "0",
        "--log-level",
        "warning",
    )
    rotated = issue(["localhost", "127.0.0.1"])
    new_ca = tmp_path / "new-ca.crt"
    new_ca.write_bytes(rotated.ca_pem)
    context = webhook.context([webhook.ca_file, new_ca])
    bodies = [
        review(replica_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(1000 + i % 10)}))
        for i in range(50)
    ]
    failures: list[str] = []
    latencies: list[list[float]] = [[] for _ in range(CLIENTS)]
    done = [0]
    lock = threading.Lock()

    def client(index: int) -> None:
        connection = webhook.connection(context)
        for i in range(REQUESTS // CLIENTS):
            if i % 500 == 499:  # new connections now and then: new handshakes, across the rotation
                connection.close()
                connection = webhook.connection(context)
            started = time.perf_counter()
            try:
                status, body = webhook.post(bodies[(index + i) % len(bodies)], connection)
                if status != 200 or body["response"]["allowed"] is not True:
                    failures.append(f"{status} {str(body)[:200]}")
            except Exception as error:
                failures.append(repr(error))
                connection.close()
                connection = webhook.connection(context)
            latencies[index].append(time.perf_counter() - started)
            with lock:
                done[0] += 1
        connection.close()

    warm = webhook.connection(context)
    for body in bodies:
        webhook.post(body, warm)
    warm.close()
    rss_start = rss_mib(webhook.process.pid)
    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for thread in threads:
        thread.start()
    _wait_for_half(done)
    webhook.cert_file.write_bytes(rotated.cert_pem)
    webhook.key_file.write_bytes(rotated.key_pem)
    for thread in threads:
        thread.join()
    rss_end = rss_mib(webhook.process.pid)
    served = served_serial(webhook, context)
    webhook.stop()
    first, last = _quarters(latencies)
    print(
        f"\nsoak: {REQUESTS} admissions, {len(failures)} failures, RSS {rss_start:.1f} -> {rss_end:.1f} MiB,"
        f" p99 first quarter {p99(first) * 1000:.2f} ms, last quarter {p99(last) * 1000:.2f} ms"
    )
    assert failures == []
    assert served == x509.load_pem_x509_certificate(rotated.cert_pem).serial_number
    assert rss_end - rss_start < max(15.0, rss_start * 0.15), (rss_start, rss_end)
    assert p99(last) < p99(first) * 3 + 0.005
    assert len(kube.get("resourceclaimtemplates", "-n", "team-a")["items"]) == 10
