"""GPU memory and cores quotas keep limiting converted pods (issue 47), on the real control
plane: every GPU pod of a namespace with such a quota is created held by the scheduling gate
`hami.io/gpu-quota`, and the webhook releases exactly as many as fit; the rest stay Pending,
named in a Warning Event. The fake node's ResourceSlices stand in for the driver's (no GPU
here); the gate and its release are the real kube-apiserver's and the webhook's."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from hami_dra_webhook.core.quota.gpu_quota import GATE, NAMESPACE_LABEL
from tests.support.cluster import Cluster, Release, wait_for
from tests.support.pods import gpu_pod

# What this module proves is the webhook's own work over APIs that are GA in every version
# here (ResourceQuota, scheduling gates, Leases, Events): it runs on the oldest and the newest
# flavor with consumable capacity. What each version accepts is test_admission.py's, on all.
pytestmark = pytest.mark.e2e_on(capacity=True, versions=("1.34", "1.38"))
MEM, CORES = "limits.nvidia.com/gpumem", "limits.nvidia.com/gpucores"


def _quota(cluster: Cluster, namespace: str, hard: dict[str, str]) -> None:
    body = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu"}}
    cluster.apply({**body, "spec": {"hard": hard}}, namespace=namespace)
    wait_for(
        lambda: (
            cluster.get("namespace", namespace)["metadata"].get("labels", {}).get(NAMESPACE_LABEL)
        ),
        "the webhook labels the quota's namespace",
        timeout=30,
    )


@contextlib.contextmanager
def _lease_held_elsewhere(cluster: Cluster, hami: Release) -> Iterator[None]:
    """The webhook's Lease taken by another identity for an hour (a replica that has not let
    go); deleted afterwards, so that the webhook takes it again."""
    lease = f"{hami.fullname}-gpu-quota"
    body = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": lease},
        "spec": {
            "holderIdentity": "another-replica",
            "leaseDurationSeconds": 3600,
            "renewTime": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime()),
        },
    }
    cluster.kubectl(
        "apply", "--server-side", "--force-conflicts", "-n", hami.namespace, "-f", "-",
        stdin=json.dumps(body),
    )  # fmt: skip
    try:
        time.sleep(2)  # the webhook's pass in flight, if any, ends
        yield
    finally:
        cluster.kubectl("delete", "lease", lease, "-n", hami.namespace)


def _gated(pod: dict[str, Any]) -> bool:
    return any(g.get("name") == GATE for g in pod["spec"].get("schedulingGates") or [])


def _create_all(cluster: Cluster, namespace: str, pods: list[dict[str, Any]]) -> None:
    with ThreadPoolExecutor(max_workers=len(pods)) as pool:
        list(pool.map(lambda pod: cluster.apply(pod, namespace=namespace), pods))


def _settled(cluster: Cluster, namespace: str, released: int, total: int) -> list[dict[str, Any]]:
    """The pods once `released` of `total` are out of the gate, checked again after three more
    passes so that a late release would be seen."""

    def counted() -> list[dict[str, Any]] | None:
        pods = cluster.pods(namespace)
        out = [p for p in pods if not _gated(p)]
        return pods if len(pods) == total and len(out) >= released else None

    wait_for(counted, f"{released} of {total} pods released", timeout=60)
    time.sleep(3)
    pods = cluster.pods(namespace)
    assert sum(not _gated(p) for p in pods) == released, [p["metadata"]["name"] for p in pods]
    return pods


def test_twenty_concurrent_creates_let_exactly_what_fits_run(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    _quota(cluster, namespace, {MEM: "8000"})
    limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000}
    _create_all(cluster, namespace, [gpu_pod(f"p{i}", limits) for i in range(20)])
    pods = _settled(cluster, namespace, 8, 20)
    held = [p["metadata"]["name"] for p in pods if _gated(p)]

    def told() -> str | None:
        events = cluster.get(
            "events", "-n", namespace, f"--field-selector=involvedObject.name={held[0]}"
        )
        found = [
            e["message"]
            for e in events["items"]
            if e["reason"] == "GPUQuotaExceeded" and "exceeded quota" in e["message"]
        ]  # (an earlier one may say it waits for its claims: the first pass can see none)
        return found[0] if found else None

    message = wait_for(told, "a Warning Event on a held pod")
    assert (
        "exceeded quota: gpu, requested: limits.nvidia.com/gpumem=1000, used:"
        " limits.nvidia.com/gpumem=8000, limited: limits.nvidia.com/gpumem=8000" in message
    )
    # Deletes free room: two go, two held pods follow. (Forced: no kubelet runs here to end
    # them, and a terminating pod keeps its charge until it is gone, as HAMi's does.)
    out = [p["metadata"]["name"] for p in pods if not _gated(p)][:2]
    deleted = time.monotonic()
    cluster.kubectl("delete", "pod", "-n", namespace, "--grace-period=0", "--force", *out)
    _settled(cluster, namespace, 8, 18)
    print(f"released after a delete within {time.monotonic() - deleted:.1f}s")


def test_cores_quota_lets_three_thirty_percent_pods_run(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    _quota(cluster, namespace, {CORES: "100"})
    limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000, "nvidia.com/gpucores": 30}
    _create_all(cluster, namespace, [gpu_pod(f"c{i}", limits) for i in range(5)])
    _settled(cluster, namespace, 3, 5)


def test_namespaces_without_a_gpu_quota_are_never_held(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "pods"},
            "spec": {"hard": {"pods": "50"}},
        },
        namespace=namespace,
    )
    cluster.apply(
        gpu_pod("free", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000}), namespace=namespace
    )
    time.sleep(3)  # three passes
    assert not _gated(cluster.pod(namespace, "free"))
    labels = cluster.get("namespace", namespace)["metadata"].get("labels", {})
    assert NAMESPACE_LABEL not in labels


def test_a_tenant_cannot_release_their_own_pod_or_create_one_unheld(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    _quota(cluster, namespace, {MEM: "1000"})
    limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000}
    cluster.apply(gpu_pod("first", limits), namespace=namespace)
    cluster.apply(gpu_pod("second", limits), namespace=namespace)
    _settled(cluster, namespace, 1, 2)
    held = next(p for p in cluster.pods(namespace) if _gated(p))
    name = held["metadata"]["name"]
    cluster.kubectl("create", "serviceaccount", "tenant", "-n", namespace)
    cluster.kubectl(
        "create",
        "rolebinding",
        "tenant",
        "-n",
        namespace,
        "--clusterrole=edit",
        f"--serviceaccount={namespace}:tenant",
    )
    tenant = cluster.service_account_kubeconfig(namespace, "tenant")
    index = [g["name"] for g in held["spec"]["schedulingGates"]].index(GATE)
    removed = cluster.kubectl(
        "patch", "pod", name, "-n", namespace, "--type=json",
        f'-p=[{{"op":"remove","path":"/spec/schedulingGates/{index}"}}]',
        check=False, kubeconfig=tenant,
    )  # fmt: skip
    assert removed.returncode != 0 and "only hami-dra-webhook removes" in removed.stderr
    # A pod that skips the gate webhook (the pod webhook's mark written by the tenant, on a pod
    # opted out of conversion) is refused by the policy, which reads the quota itself.
    unheld = gpu_pod("third", limits)
    unheld["metadata"]["labels"] = {"hami.io/webhook": "ignore"}
    unheld["metadata"]["annotations"] = {"hami.io/gpu-quota-decided": "free"}
    refused = cluster.kubectl(
        "apply", "-n", namespace, "-f", "-", check=False, kubeconfig=tenant,
        stdin=yaml.safe_dump(unheld),
    )  # fmt: skip
    assert refused.returncode != 0 and "ResourceQuota gpu limits" in refused.stderr, refused.stderr


def test_two_replicas_release_exactly_what_fits(
    cluster: Cluster, hami: Release, namespace: str, tmp_path: Path
) -> None:
    """A second webhook process with the chart's arguments and identity: both run the quota
    pass; the Lease lets one release at a time."""
    second = hami.replica(tmp_path / "second")
    try:
        _quota(cluster, namespace, {MEM: "8000"})
        limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000}
        for wave in range(4):  # creates spread over time
            _create_all(cluster, namespace, [gpu_pod(f"w{wave}-{i}", limits) for i in range(5)])
            time.sleep(0.7)
        _settled(cluster, namespace, 8, 20)
    finally:
        second.stop()


def test_a_lowered_quota_keeps_running_pods_and_holds_new_ones(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    _quota(cluster, namespace, {MEM: "3000"})
    limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000}
    _create_all(cluster, namespace, [gpu_pod(f"r{i}", limits) for i in range(3)])
    _settled(cluster, namespace, 3, 3)
    _quota(cluster, namespace, {MEM: "1000"})
    cluster.apply(gpu_pod("late", limits), namespace=namespace)
    pods = _settled(cluster, namespace, 3, 4)
    assert _gated(next(p for p in pods if p["metadata"]["name"] == "late"))


def test_a_deleted_quota_releases_every_held_pod(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    _quota(cluster, namespace, {MEM: "1000"})
    limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000}
    _create_all(cluster, namespace, [gpu_pod(f"d{i}", limits) for i in range(3)])
    _settled(cluster, namespace, 1, 3)
    cluster.kubectl("delete", "resourcequota", "gpu", "-n", namespace)
    pods = _settled(cluster, namespace, 3, 3)
    assert not any(p["metadata"].get("labels", {}).get("hami.io/gpu-quota") for p in pods)
    wait_for(
        lambda: NAMESPACE_LABEL not in cluster.get("namespace", namespace)["metadata"]["labels"],
        "the namespace label removed with its last GPU quota",
    )


def test_while_the_webhook_is_down_nothing_passes_and_nothing_leaks(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    """failurePolicy Fail (the chart's default): no GPU pod of a quota namespace is created
    while no replica answers; held pods stay held; once it is back, they are released from
    the live pods (no state was kept to lose)."""
    _quota(cluster, namespace, {MEM: "2000"})
    limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000}
    _create_all(cluster, namespace, [gpu_pod(f"u{i}", limits) for i in range(3)])
    pods = _settled(cluster, namespace, 2, 3)
    assert hami.webhook is not None
    folder = hami.webhook.folder
    hami.stop()
    try:
        refused = cluster.kubectl(
            "apply", "-n", namespace, "-f", "-", check=False,
            stdin=yaml.safe_dump(gpu_pod("meanwhile", limits)),
        )  # fmt: skip
        assert refused.returncode != 0 and "failed calling webhook" in refused.stderr
        out = next(p["metadata"]["name"] for p in pods if not _gated(p))
        cluster.kubectl("delete", "pod", out, "-n", namespace, "--grace-period=0", "--force")
        time.sleep(3)  # no replica: the held pod stays held
        assert sum(_gated(p) for p in cluster.pods(namespace)) == 1
    finally:
        hami.start(folder).wait_ready(timeout=60)
    _settled(cluster, namespace, 2, 2)


def test_only_the_lease_holder_releases(cluster: Cluster, hami: Release, namespace: str) -> None:
    """Another identity holding the Lease (a replica that has not let go): nothing is released
    until it expires or is deleted."""
    _quota(cluster, namespace, {MEM: "2000"})  # labelled by the webhook, the holder now
    with _lease_held_elsewhere(cluster, hami):
        limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000}
        cluster.apply(gpu_pod("waits", limits), namespace=namespace)
        time.sleep(4)
        assert _gated(cluster.pod(namespace, "waits"))
    _settled(cluster, namespace, 1, 1)
