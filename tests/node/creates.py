"""A client that creates GPU pods without a pause while something happens to the webhook
(a rollout, a SIGKILL, a certificate renewal), bounded in count and time.

The creates are real (stored, through the whole admission chain); each pod asks for a node that
does not exist, so it is never scheduled, and is deleted right after it is created, so a 2-core
node is not flooded. (Server-side dry runs were tried first: after a rollout the new replicas
refused them with 429, since a dry run never stores its template and each one counts against
the webhook's per-namespace limit on new templates; real creates store it once.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.node.conftest import NodeCluster

MAX_CREATES = 3000
MAX_SECONDS = 150.0
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"generateName": "creates-"},
    "spec": {
        "nodeSelector": {"node-test.hami.io/never": "true"},
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "cuda",
                "image": "docker.io/library/ubuntu:22.04",
                "resources": {"limits": {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000}},
            }
        ],
    },
}


@dataclass
class Creates:
    """What the client saw: every create that did not come back converted is a failure."""

    attempted: int = 0
    failures: list[str] = field(default_factory=list)
    failure_times: list[tuple[str, float]] = field(default_factory=list)
    worst: float = 0.0
    by_phase: dict[str, int] = field(default_factory=dict)
    phase: str = "steady"

    def numbers(self) -> dict[str, Any]:
        return {
            "attempted": self.attempted,
            "failed": len(self.failures),
            "worst_latency_s": round(self.worst, 3),
            "by_phase": self.by_phase,
            "failures": self.failures[:20],
        }


def _client(
    cluster: NodeCluster,
    namespace: str,
    stop: threading.Event,
    out: Creates,
    max_seconds: float,
    converted_only: bool,
) -> None:
    deadline = time.monotonic() + max_seconds
    path = f"/api/v1/namespaces/{namespace}/pods"
    while not stop.is_set() and out.attempted < MAX_CREATES and time.monotonic() < deadline:
        started = time.monotonic()
        try:
            status, body = cluster.plane.request("POST", path, POD)
        except OSError as error:
            status, body = 0, {"message": repr(error)}
        elapsed = time.monotonic() - started
        out.attempted += 1
        out.by_phase[out.phase] = out.by_phase.get(out.phase, 0) + 1
        out.worst = max(out.worst, elapsed)
        converted = status == 201 and body["spec"].get("resourceClaims")
        if not converted if converted_only else status != 201:
            message = body.get("message", str(body)) if isinstance(body, dict) else str(body)
            out.failures.append(f"{out.phase}: {status} {message[-400:]}")
            out.failure_times.append((out.phase, started))
        if status == 201:
            name = body["metadata"]["name"]
            cluster.plane.request("DELETE", f"{path}/{name}", {"gracePeriodSeconds": 0})
        time.sleep(0.02)


@contextmanager
def creating_pods(
    cluster: NodeCluster,
    namespace: str,
    max_seconds: float = MAX_SECONDS,
    converted_only: bool = True,
) -> Iterator[Creates]:
    """Creates GPU pods in `namespace` until the block ends (or MAX_CREATES, or max_seconds).
    A create fails unless it comes back converted; with `converted_only=False` (the webhook
    is being uninstalled), unless it is created at all."""
    stop, creates = threading.Event(), Creates()
    client = threading.Thread(
        target=_client,
        args=(cluster, namespace, stop, creates, max_seconds, converted_only),
        daemon=True,
    )
    client.start()
    try:
        yield creates
    finally:
        stop.set()
        client.join(timeout=30)
