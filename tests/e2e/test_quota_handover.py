"""Issue 62 on the real control plane: the chart's replicas rolled over while a client creates GPU
pods in a namespace whose quota was created a moment before, and the quota work handed over
between replicas (SIGTERM: at once, the Lease released; SIGKILL: once it expires).

The replicas are local processes under the chart's ServiceAccount (kube-apiserver reaches the
one admission.url names): the rollout starts the new one beside the old, moves the URL to it with
`helm upgrade` (a value changed, as a rollout's cause), then stops the old with SIGTERM."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from hami_dra_webhook.core.quota.gpu_quota import GATE
from tests.controlplane.cluster import free_port
from tests.support.cluster import Cluster, Release, wait_for
from tests.support.pods import gpu_pod
from tests.support.webhook_process import Webhook

pytestmark = pytest.mark.e2e_on(capacity=True, versions=("1.38",))
MEM = "limits.nvidia.com/gpumem"
LIMITS = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000}
NOWHERE = {"e2e.hami.io/nowhere": "yes"}  # released or held, never scheduled: counted as asked


def _gated(pod: dict[str, Any]) -> bool:
    return any(g.get("name") == GATE for g in pod["spec"].get("schedulingGates") or [])


def _holder(cluster: Cluster, hami: Release) -> str:
    lease = (
        f"/apis/coordination.k8s.io/v1/namespaces/{hami.namespace}/leases/{hami.fullname}-gpu-quota"
    )
    code, found = cluster.plane.request("GET", lease)
    return str(found["spec"].get("holderIdentity") or "") if code == 200 else ""


def _identity(webhook: Webhook) -> str:
    return f"-{webhook.process.pid}"  # the Lease holder's identity ends with its process id


class Client:
    """Creates a GPU pod every `every` seconds until stopped, and notes each answer; watches
    that no more pods are released at once than the quota lets run."""

    def __init__(self, cluster: Cluster, namespace: str, every: float = 0.15) -> None:
        self.cluster, self.namespace, self.every = cluster, namespace, every
        self.answers: list[int] = []
        self.refused: list[str] = []
        self.most_released = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._create, daemon=True)

    def __enter__(self) -> Client:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _create(self) -> None:
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        index = 0
        while not self._stop.is_set():
            pod = gpu_pod(f"w{index:03d}", LIMITS, nodeSelector=NOWHERE)
            code, answer = self.cluster.plane.request("POST", path, pod)
            self.answers.append(code)
            if code != 201:
                self.refused.append(str((answer or {}).get("message", answer))[:300])
            index += 1
            code, listed = self.cluster.plane.request("GET", path)
            if code == 200:
                released = sum(not _gated(p) for p in listed["items"])
                self.most_released = max(self.most_released, released)
            self._stop.wait(self.every)


def test_a_rollout_refuses_no_pod_and_the_work_changes_hands(
    cluster: Cluster, hami: Release, namespace: str, tmp_path: Path
) -> None:
    assert hami.webhook is not None
    old = hami.webhook
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "gpu"},
            "spec": {"hard": {MEM: "8000"}},
        },
        namespace=namespace,
    )  # no wait: the pods follow at once
    with Client(cluster, namespace) as client:
        time.sleep(1.0)
        hami.port = free_port()
        new = hami.start(tmp_path / "new")  # the new replica beside the old
        hami.upgrade("--set", "webhook.logLevel=debug")  # kube-apiserver calls the new one
        time.sleep(1.0)
        stopped = time.monotonic()
        old.stop()  # SIGTERM: it releases the Lease
        wait_for(lambda: _holder(cluster, hami).endswith(_identity(new)), "the new replica's Lease")
        after_term = time.monotonic() - stopped
        time.sleep(1.5)
    print(
        f"rollout: {len(client.answers)} pods created, {len(client.refused)} refused, at most"
        f" {client.most_released} released at once (the quota lets 8 run)"
    )
    assert client.refused == [], client.refused
    assert len(client.answers) >= 15, client.answers
    pods = cluster.pods(namespace)
    released = [p["metadata"]["name"] for p in pods if not _gated(p)]
    assert len(released) == 8 and client.most_released <= 8, (released, client.most_released)
    # Room freed: as many held pods follow.
    cluster.kubectl("delete", "pod", "-n", namespace, "--grace-period=0", "--force", *released[:3])
    wait_for(
        lambda: sum(not _gated(p) for p in cluster.pods(namespace)) == 8 or None,
        "three held pods released after three released ones ended",
    )
    # A replica killed: the other takes the work once its Lease expires.
    follower = hami.replica(tmp_path / "follower")
    try:
        killed = time.monotonic()
        new.stop(signal.SIGKILL)
        wait_for(
            lambda: _holder(cluster, hami).endswith(_identity(follower)),
            "the other replica's Lease after a kill",
            timeout=40,
        )
        after_kill = time.monotonic() - killed
    finally:
        follower.stop()
        hami.start(tmp_path / "again")  # the fixture's webhook serving again, for later tests
    print(
        f"the work changed hands {after_term:.2f}s after SIGTERM, {after_kill:.1f}s after SIGKILL"
    )
    assert after_term < 3.0
    assert after_kill <= 15 + 5  # the Lease's duration, and the follower's next look
