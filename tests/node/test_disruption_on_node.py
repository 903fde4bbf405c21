"""failurePolicy Fail with two webhook replicas: while a client creates GPU pods without a
pause (bounded: at most 3,000 creates, at most 240 s), two `kubectl rollout restart`s of the
webhook make no pod creation fail (the PodDisruptionBudget's maxUnavailable, the webhook's own
drain, in which every answer closes its connection, readiness before the old pod goes, and
kube-apiserver's keep-alive connections to the ready replica). With a preStop sleep instead of
the drain, one create in 200 failed with `EOF` in one run of three: the old replica closed
kube-apiserver's idle connections at SIGTERM while it was writing a request on one. A SIGKILL of one webhook container is different: until the kubelet sees the
container die and kube-proxy drops the endpoint, a new connection to its pod IP is refused, and
kube-apiserver does not retry a refused connection, nor a request whose connection ended in EOF
(k8s.io/apiserver pkg/util/webhook DefaultShouldRetry retries resets, timeouts, 429 and 500).
The test holds that window to what it is: only those transport errors, only within 5 s of the
kill, none after (measured: 0 to 3 failed creates, all within 0.2 s of the kill).

The creates are those of tests/node/creates.py (real, never scheduled, deleted at once). The
numbers (attempted, failed, worst latency) are printed and written to node-disruption.json in
the run's folder.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from tests.node.conftest import NAMESPACE, RELEASE, NodeCluster
from tests.node.creates import creating_pods
from tests.support.cluster import wait_for

pytestmark = pytest.mark.node  # the real node: runs beside the quiet tests


def _webhook_pods(cluster: NodeCluster) -> list[dict[str, object]]:
    return cluster.pods(NAMESPACE, "app.kubernetes.io/component=webhook")


def _kill_container(cluster: NodeCluster, pod: dict[str, object]) -> int:
    """SIGKILL the webhook container's process (found through containerd), as an OOM kill would."""
    assert cluster.real is not None
    status = pod["status"]["containerStatuses"][0]  # type: ignore[index]
    container = status["containerID"].removeprefix("containerd://")
    listed = cluster.real.ctr("tasks", "ls").stdout.splitlines()
    pid = next(int(line.split()[1]) for line in listed if line.startswith(container))
    os.kill(pid, signal.SIGKILL)
    return int(status["restartCount"])


def test_no_pod_creation_fails_while_the_webhook_restarts_or_loses_a_replica(
    chart: NodeCluster, namespace: str
) -> None:
    killed_at = float("inf")
    with creating_pods(chart, namespace, max_seconds=240) as creates:
        time.sleep(3)
        creates.phase = "rollout restart"
        for _ in range(2):
            chart.kubectl("rollout", "restart", f"deployment/{RELEASE}", "-n", NAMESPACE)
            chart.kubectl(
                "rollout", "status", f"deployment/{RELEASE}", "-n", NAMESPACE, "--timeout=120s"
            )
            wait_for(lambda: len(_webhook_pods(chart)) == 2, "the old pods gone", timeout=60)
        creates.phase = "steady again"
        time.sleep(3)
        creates.phase = "SIGKILL"
        victim = _webhook_pods(chart)[0]
        name = str(victim["metadata"]["name"])  # type: ignore[index]
        killed_at = time.monotonic()
        restarts = _kill_container(chart, victim)
        wait_for(
            lambda: (
                (s := chart.pod(NAMESPACE, name)["status"]["containerStatuses"][0])["restartCount"]
                > restarts
                and s["ready"]
            ),
            "the killed container restarted and ready",
            timeout=120,
        )
        creates.phase = "after"
        time.sleep(3)
    numbers = creates.numbers() | {
        "failed_after_kill_s": [round(t - killed_at, 2) for _, t in creates.failure_times],
        "rollout_failed": sum(phase == "rollout restart" for phase, _ in creates.failure_times),
    }
    print(f"disruption: {json.dumps(numbers)}")
    (chart.folder / "node-disruption.json").write_text(json.dumps(numbers, indent=1))
    assert creates.attempted > 50 and creates.by_phase["rollout restart"] > 100, numbers
    assert creates.by_phase.get("after", 0) > 0, f"the client stopped early: {numbers}"
    assert all(phase == "SIGKILL" for phase, _ in creates.failure_times), numbers
    # A request in flight on the killed process ends in EOF (or, when kube-apiserver was still
    # writing it, a broken pipe); new connections to its pod IP are refused until the endpoint
    # is gone. None is retried by kube-apiserver.
    transport = (
        "connect: connection refused",
        ": EOF",
        "connection reset by peer",
        "write: broken pipe",
    )
    assert all(any(t in failure for t in transport) for failure in creates.failures), numbers
    assert all(0 <= t - killed_at <= 5 for _, t in creates.failure_times), numbers
