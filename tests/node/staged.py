"""What the staged-migration modules share (test_staged_migration.py: pools, scope, moves
under load and failing closed; test_staged_moves.py: the moves that must evict or go in waves): the
legacy pool beside the DRA one on a 1.37 cluster with a legacy node, and the helpers that drive
and read it. Each module runs in a pytest run of its own (tests/support/suite.py), on a
cluster of its own: the two run at once.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

from hami_dra_webhook.core.model.quantity import parse_quantity
from tests.node.conftest import (
    DEVICE_CONFIG,
    LEGACY_NODE,
    NAMESPACE,
    RELEASE,
    NodeCluster,
)
from tests.node.creates import creating_pods
from tests.node.legacy import (
    CARDS,
    SPLIT,
    device_plugin_daemonset,
    legacy_slots,
    wait_legacy_served,
)
from tests.node.legacy import NAMESPACE as LEGACY_NAMESPACE
from tests.node.workloads import gpu_env, limits_of, sleeping_pod
from tests.support.chart_tools import CHART
from tests.support.cluster import wait_for

POOL = "hami.io/gpu-pool"


CORDON = "hami.io/device-cordon"


CORDONED_CARD = "GPU-1c000000-0000-4000-8000-000000000000"  # the stand-in driver's hami-gpu-0


OPT_IN = "hami.io/gpu-migration"


DRIVER = "hami-core-gpu.project-hami.io"


REPLICAS = 3


TOLERATE_GPU_NODES = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


LIMITS = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000, "nvidia.com/gpucores": 30}


def cli(cluster: NodeCluster, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "hami_dra_webhook",
            *args,
            f"--kubeconfig={cluster.plane.admin_kubeconfig}",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )


def gpu_container(command: str = "env; exec sleep 3600") -> dict[str, Any]:
    return {
        "name": "cuda",
        "image": "docker.io/library/ubuntu:22.04",
        "command": ["sh", "-c", command],
        "resources": {"limits": dict(LIMITS)},
    }


def legacy_gpu_pod(name: str) -> dict[str, Any]:
    return sleeping_pod(
        name, dict(LIMITS), command="env; exec sleep 3600", tolerations=TOLERATE_GPU_NODES
    )


def deployment(name: str) -> list[dict[str, Any]]:
    labels = {"app": name}
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name},
            "spec": {
                "replicas": REPLICAS,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "terminationGracePeriodSeconds": 1,
                        "tolerations": TOLERATE_GPU_NODES,
                        "containers": [gpu_container()],
                    },
                },
            },
        },
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": labels}},
        },
    ]


def apply(cluster: NodeCluster, namespace: str, *objects: dict[str, Any]) -> None:
    cluster.apply({"apiVersion": "v1", "kind": "List", "items": list(objects)}, namespace=namespace)


def legacy_limits(pod: dict[str, Any]) -> dict[str, Any]:
    return {
        key: value
        for container in pod["spec"]["containers"]
        for key, value in ((container.get("resources") or {}).get("limits") or {}).items()
        if key.startswith("nvidia.com/")
    }


def container_env(cluster: NodeCluster, namespace: str, name: str) -> dict[str, str]:
    logs = cluster.kubectl("logs", name, "-n", namespace).stdout
    found = gpu_env(logs)
    if "HAMI_LEGACY_STAND_IN=1" in logs:
        found["HAMI_LEGACY_STAND_IN"] = "1"
    return found


def running(cluster: NodeCluster, namespace: str, name: str) -> dict[str, Any] | None:
    pod = cluster.pod(namespace, name)
    return pod if pod["status"].get("phase") == "Running" else None


def wait_running(cluster: NodeCluster, namespace: str, name: str) -> dict[str, Any]:
    """The pod once Running; else fail with what kube-scheduler and the kubelet said."""
    try:
        return wait_for(lambda: running(cluster, namespace, name), f"{namespace}/{name}", 120)
    except AssertionError as error:
        events = cluster.kubectl("get", "events", "-n", namespace, check=False).stdout
        pod = cluster.kubectl("get", "pod", name, "-n", namespace, "-o", "yaml", check=False)
        raise AssertionError(f"{error}\n{events}\n{pod.stdout[-3000:]}") from None


def driver_devices(cluster: NodeCluster, node: str) -> int:
    slices = cluster.get("resourceslices")["items"]
    return sum(
        len(s["spec"].get("devices") or [])
        for s in slices
        if s["spec"].get("nodeName") == node and s["spec"].get("driver") == DRIVER
    )


def set_scope(cluster: NodeCluster, scope: str, whole_gpus: bool) -> None:
    """The chart's migration.scope, and hamiDraWebhook.wholeGpusByExtendedResource."""
    config = DEVICE_CONFIG + ("  wholeGpusByExtendedResource: true\n" if whole_gpus else "")
    values = cluster.folder / "staged-values.yaml"
    values.write_text(yaml.safe_dump({"deviceConfig": config, "migration": {"scope": scope}}))
    cluster.helm(
        "upgrade", RELEASE, str(CHART), "-n", NAMESPACE, "--reuse-values", "-f", str(values),
    )  # fmt: skip
    cluster.wait_chart_ready()


@dataclass
class Timeline:
    """What a sampler saw every half second: the node's pool label, the device plugin's
    nvidia.com/gpu allocatable, the driver's devices published for it, the ready replicas."""

    samples: list[tuple[float, str, int, int, int]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    node: str = LEGACY_NODE

    def sample(self, cluster: NodeCluster, namespace: str, stop: threading.Event) -> None:
        started = time.monotonic()
        while not stop.is_set() and time.monotonic() - started < 900:
            try:
                _, node = cluster.plane.request("GET", f"/api/v1/nodes/{self.node}")
                _, slices = cluster.plane.request(
                    "GET",
                    "/apis/resource.k8s.io/v1/resourceslices"
                    f"?fieldSelector=spec.nodeName%3D{self.node}",
                )
                _, workload = cluster.plane.request(
                    "GET", f"/apis/apps/v1/namespaces/{namespace}/deployments/train"
                )
                label = node["metadata"]["labels"].get(POOL, "")
                slots = int((node["status"].get("allocatable") or {}).get("nvidia.com/gpu", "0"))
                devices = sum(len(s["spec"].get("devices") or []) for s in slices["items"])
                ready = int((workload.get("status") or {}).get("readyReplicas") or 0)
                self.samples.append((time.monotonic() - started, label, slots, devices, ready))
            except (OSError, KeyError, TypeError, ValueError) as error:
                self.errors.append(repr(error))
            stop.wait(0.5)

    def both(self) -> list[tuple[float, str, int, int, int]]:
        return [s for s in self.samples if s[2] > 0 and s[3] > 0]

    def changes(self) -> list[str]:
        said, last = [], None
        for seconds, label, slots, devices, _ in self.samples:
            now = (label, slots > 0, devices > 0)
            if now != last:
                said.append(f"{seconds:6.1f}s label={label} plugin={slots} driver={devices}")
                last = now
        return said


def node_state(cluster: NodeCluster) -> tuple[str, bool, str]:
    """The legacy node's pool label, cordon, and its move annotation's step ("" for none)."""
    node = cluster.get("node", LEGACY_NODE)
    move = (node["metadata"].get("annotations") or {}).get("hami.io/gpu-pool-move")
    step = json.loads(move)["step"] if move else ""
    return node["metadata"]["labels"].get(POOL, ""), bool(node["spec"].get("unschedulable")), step


def running_replicas(cluster: NodeCluster, namespace: str) -> list[dict[str, Any]] | None:
    found = [
        p
        for p in cluster.pods(namespace, "app=train")
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    ]
    return found if len(found) == REPLICAS else None


def legacy_replicas_opted_in(cluster: NodeCluster, namespace: str) -> None:
    """The Deployment runs legacy on the legacy node; then its namespace is opted in, and
    `migrate status` and the move's plan say the replicas would convert onto the DRA node."""
    apply(cluster, namespace, *deployment("train"))
    pods = wait_for(lambda: running_replicas(cluster, namespace), "the legacy replicas", 180)
    assert {p["spec"]["nodeName"] for p in pods} == {LEGACY_NODE}
    assert all(legacy_limits(p) for p in pods)
    first = pods[0]["metadata"]["name"]
    assert container_env(cluster, namespace, first)["HAMI_LEGACY_STAND_IN"] == "1"
    cluster.kubectl("label", "namespace", namespace, f"{OPT_IN}=dra")
    # HAMi v2.10's per-card cordon: the move carries it into a DeviceTaintRule (issue 64)
    cluster.kubectl("annotate", "node", LEGACY_NODE, f"{CORDON}={CORDONED_CARD}", "--overwrite")
    status = json.loads(cli(cluster, "migrate", "status", "-o", "json").stdout)
    mine = status["namespaces"][namespace]
    assert (mine["inScope"], mine["legacy"], mine["converted"]) == (True, REPLICAS, 0), status
    assert [p["blocker"] for p in mine["legacyPods"]] == [""] * REPLICAS, status
    assert status["pools"]["legacy"]["slotsUsed"] >= REPLICAS, status
    (cluster.folder / "staged-status-before.txt").write_text(
        cli(cluster, "migrate", "status").stdout
    )
    plan = cli(cluster, "migrate", "node", LEGACY_NODE, "--to", "dra", "--dry-run", "-o", "json")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    steps = json.loads(plan.stdout)["plan"]
    assert len(steps) == REPLICAS
    assert {s["goes"] for s in steps} == {f"converted onto DRA node {cluster.node.name}"}, steps
    assert all(s["fits"] and s["owner"].startswith("ReplicaSet/") for s in steps), steps


def converted_replicas(cluster: NodeCluster, namespace: str) -> None:
    replicas = wait_for(lambda: running_replicas(cluster, namespace), "converted replicas", 180)
    for pod in replicas:
        assert pod["spec"]["resourceClaims"] and not legacy_limits(pod), pod["spec"]
        env = container_env(cluster, namespace, pod["metadata"]["name"])
        assert limits_of(env) == [("3000m", "30")], env
    assert node_state(cluster) == ("dra", False, "")
    assert driver_devices(cluster, LEGACY_NODE) > 0 and legacy_slots(cluster, LEGACY_NODE) == 0
    cordon_carried(cluster)
    status = json.loads(cli(cluster, "migrate", "status", "-o", "json").stdout)
    mine = status["namespaces"][namespace]
    # The replicas, and the create client's pods that exist at that moment.
    assert mine["legacy"] == 0 and mine["converted"] >= REPLICAS, status
    (cluster.folder / "staged-status-after.txt").write_text(
        cli(cluster, "migrate", "status").stdout
    )


def cordon_rules(cluster: NodeCluster) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = cluster.get(
        "devicetaintrules", "-l", f"hami.io/device-cordon-node={LEGACY_NODE}"
    )["items"]
    return rules


def cordon_carried(cluster: NodeCluster) -> None:
    """The cordoned card is one DeviceTaintRule (NoSchedule) of the driver's device with its
    UUID."""
    (rule,) = cordon_rules(cluster)
    rule["spec"]["taint"].pop("timeAdded", None)  # the server's
    assert rule["spec"] == {
        "deviceSelector": {"driver": DRIVER, "pool": LEGACY_NODE, "device": "hami-gpu-0"},
        "taint": {"key": CORDON, "value": "true", "effect": "NoSchedule"},
    }, rule


def cordoned_card_unused(cluster: NodeCluster) -> None:
    """No claim allocated on the node (a pod pinned there holds one) got the cordoned card."""
    given = [
        (result["pool"], result["device"])
        for claim in cluster.get("resourceclaims", "-A")["items"]
        for result in ((claim.get("status") or {}).get("allocation") or {})
        .get("devices", {})
        .get("results", [])
    ]
    assert any(pool == LEGACY_NODE for pool, _ in given), given  # the pinned pod's
    assert (LEGACY_NODE, "hami-gpu-0") not in given, given


def move_events_on_the_node(cluster: NodeCluster, namespace: str) -> None:
    """Every step of the move is an Event on the Node (kubectl describe node shows them), and
    every evicted pod has one saying why."""
    node_events = cluster.get(
        "events", "-n", "default", f"--field-selector=involvedObject.name={LEGACY_NODE}"
    )["items"]
    reasons = {e["reason"] for e in node_events if e["reason"].startswith("GpuPoolMove")}
    wanted = {"GpuPoolMoveStarted", "GpuPoolMoveCordoned", "GpuPoolMoveEvicted"}
    wanted |= {"GpuPoolMoveDrained", "GpuPoolMoveServed", "GpuPoolMoveDone"}
    wanted |= {"GpuPoolMoveCanary", "GpuPoolMoveCanaryPassed", "GpuPoolMoveCordonsCarried"}
    assert wanted <= reasons, reasons
    evicted = [
        e
        for e in cluster.get("events", "-n", namespace)["items"]
        if e["reason"] == "GpuPoolMoveEvicted"
    ]
    assert len(evicted) >= REPLICAS and all(LEGACY_NODE in e["message"] for e in evicted), evicted


def back_to_legacy_interrupted(cluster: NodeCluster, namespace: str) -> None:
    """The move back (a rollback): refused while a converted pod's claim is allocated on the
    node, naming it, and nothing done; allowed once that pod is gone. Then SIGKILLed once the
    node is drained, and run again: it resumes."""
    apply(cluster, namespace, pinned(legacy_gpu_pod("held-here")))
    wait_running(cluster, namespace, "held-here")
    cordoned_card_unused(cluster)
    refused = cli(cluster, "migrate", "node", LEGACY_NODE, "--to", "legacy", "-o", "json")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    plan = json.loads(refused.stdout)
    (held,) = [s for s in plan["plan"] if s["name"] == "held-here"]
    assert plan["moved"] is False and held["allocatedClaims"], plan
    assert node_state(cluster) == ("dra", False, "")  # nothing done
    text = cli(cluster, "migrate", "node", LEGACY_NODE, "--to", "legacy").stdout
    assert "refusing: DRA claims are allocated on the node" in text, text
    cluster.kubectl("delete", "pod", "held-here", "-n", namespace, "--wait=true")
    back = subprocess.Popen(
        [sys.executable, "-m", "hami_dra_webhook", "migrate", "node", LEGACY_NODE, "--to", "legacy",
         f"--kubeconfig={cluster.plane.admin_kubeconfig}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for(lambda: node_state(cluster)[2] == "drained", "the move back drained", timeout=120)
    finally:
        back.send_signal(signal.SIGKILL)
        back.wait(timeout=30)
    assert node_state(cluster)[1:] == (True, "drained")
    resumed = cli(cluster, "migrate", "node", LEGACY_NODE, "--to", "legacy", "-o", "json")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    result = json.loads(resumed.stdout)
    assert result["timeline"][0]["step"] == "resumed", result
    assert cordon_rules(cluster) == []  # legacy HAMi reads the annotation itself again
    assert "cordonsDropped" in {t["step"] for t in result["timeline"]}, result
    cluster.kubectl("annotate", "node", LEGACY_NODE, f"{CORDON}-")
    (cluster.folder / "staged-back.json").write_text(resumed.stdout)
    assert node_state(cluster) == ("legacy", False, "")
    wait_for(lambda: driver_devices(cluster, LEGACY_NODE) == 0, "no driver slice on it", 60)
    assert legacy_slots(cluster, LEGACY_NODE) == CARDS * SPLIT


def move_under_load(mixed: NodeCluster, namespace: str) -> None:
    legacy_replicas_opted_in(mixed, namespace)
    timeline, stop = Timeline(), threading.Event()
    sampler = threading.Thread(target=timeline.sample, args=(mixed, namespace, stop), daemon=True)
    sampler.start()
    started = time.monotonic()
    with creating_pods(mixed, namespace, max_seconds=600) as creates:
        # The fleet command: the legacy pool is one node here, its canary and only wave.
        moved = cli(mixed, "migrate", "wave", "--to", "dra", "--pool", "legacy", "--timeout", "8m")
        move_seconds = time.monotonic() - started
        assert moved.returncode == 0, moved.stdout + moved.stderr
        assert f"wave 1 (canary): {LEGACY_NODE}" in moved.stdout, moved.stdout
        assert "moved 1 node(s) in 1 wave(s)" in moved.stdout, moved.stdout
        (mixed.folder / "staged-move.txt").write_text(moved.stdout)
        move_events_on_the_node(mixed, namespace)
        converted_replicas(mixed, namespace)
        creates.phase = "back"
        back_to_legacy_interrupted(mixed, namespace)
    stop.set()
    sampler.join(timeout=30)
    numbers = creates.numbers()
    ready = [s[4] for s in timeline.samples if s[0] <= move_seconds]
    summary = {
        "pods_moved": REPLICAS,
        "min_ready": min(ready),
        "creates": numbers,
        "move_seconds": round(move_seconds, 1),
        "timeline": timeline.changes(),
    }
    (mixed.folder / "staged-summary.json").write_text(json.dumps(summary, indent=1))
    print("staged migration:", json.dumps(summary))
    assert not timeline.both(), timeline.both()
    assert not timeline.errors[:5], timeline.errors
    assert min(ready) >= REPLICAS - 1, summary
    assert numbers["failed"] == 0, numbers


def pinned(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod on the legacy node (now in the DRA pool), whatever else is free."""
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": LEGACY_NODE}
    pod["spec"]["tolerations"] = TOLERATE_GPU_NODES
    return pod


def claim_users(namespace: str) -> list[dict[str, Any]]:
    """A tenant's own ResourceClaim of the webhook's DeviceClass, its pod, and a DaemonSet
    whose pods use a claim template of the tenant's (DaemonSet pods are not evicted)."""
    request = {
        "name": "gpu",
        "exactly": {
            "deviceClassName": DRIVER,
            "capacity": {"requests": {"memory": "1Gi", "cores": "10"}},
        },
    }
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "mine"},
        "spec": {"devices": {"requests": [request]}},
    }
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "tenant-gpu"},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }
    own = pinned(sleeping_pod("own", {}))
    own["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "mine"}]
    own["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    daemon_pod = pinned(sleeping_pod("d", {}))
    daemon_pod["spec"]["resourceClaims"] = [
        {"name": "gpu", "resourceClaimTemplateName": "tenant-gpu"}
    ]
    daemon_pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    daemon_pod = {"metadata": {"labels": {"app": "holder"}}, "spec": daemon_pod["spec"]}
    daemon = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "holder"},
        "spec": {"selector": {"matchLabels": {"app": "holder"}}, "template": daemon_pod},
    }
    return [claim, template, own, daemon]


SECOND_LEGACY = "node-legacy-2"


def on_both(
    cluster: NodeCluster, namespace: str, pods: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The replicas on both legacy nodes, so that each wave moves some: when hami-scheduler put
    them all on one, that node is cordoned while one of them is deleted (its ReplicaSet puts
    the new one on the other node), then uncordoned."""
    if len({p["spec"]["nodeName"] for p in pods}) > 1:
        return pods
    full = pods[0]["spec"]["nodeName"]
    cluster.kubectl("cordon", full)
    try:
        cluster.kubectl("delete", "pod", pods[0]["metadata"]["name"], "-n", namespace)

        def spread() -> list[dict[str, Any]] | None:
            found = running_replicas(cluster, namespace)
            return found if found and len({p["spec"]["nodeName"] for p in found}) > 1 else None

        return wait_for(spread, "a replica on the other legacy node", 180)
    finally:
        cluster.kubectl("uncordon", full)


NO_DRIVER_TAINT = "hami.io/test-no-driver"


def quota_used(cluster: NodeCluster, namespace: str) -> dict[str, Any]:
    status = json.loads(cli(cluster, "migrate", "status", "-o", "json").stdout)
    return {q["key"]: q for q in status["quotas"] if q["namespace"] == namespace}


def gated(pod: dict[str, Any]) -> bool:
    return any(
        g.get("name") == "hami.io/gpu-quota" for g in pod["spec"].get("schedulingGates") or []
    )


def released_memory(cluster: NodeCluster, namespace: str) -> int:
    """The gpumem (MiB) of the namespace's released, live pods: a legacy pod's from its limits,
    a converted one's from its claim (3000 each here)."""
    total = 0
    for pod in cluster.pods(namespace):
        if gated(pod) or pod["status"].get("phase") in ("Succeeded", "Failed"):
            continue
        if legacy_limits(pod):
            total += int(parse_quantity(str(legacy_limits(pod).get("nvidia.com/gpumem", 0))))
        elif pod["spec"].get("resourceClaims"):
            total += 3000
    return total


@contextlib.contextmanager
def mixed_pools(chart: NodeCluster) -> Iterator[NodeCluster]:
    """The chart with scope `namespaces`, the first node in the DRA pool, the legacy node
    served by the device plugin stand-in, and hami-scheduler running."""
    assert chart.legacy is not None, "the 1.37 cluster has a legacy node"
    chart.kubectl("label", "node", chart.node.name, f"{POOL}=dra", "--overwrite")
    set_scope(chart, "namespaces", whole_gpus=False)
    chart.ensure_namespace(LEGACY_NAMESPACE)
    apply(chart, LEGACY_NAMESPACE, device_plugin_daemonset())
    wait_legacy_served(chart, LEGACY_NODE)
    yield chart
    if node_state(chart) != ("legacy", False, ""):  # a test stopped mid-way: move it back
        back = cli(chart, "migrate", "node", LEGACY_NODE, "--to", "legacy", "--force")
        assert back.returncode == 0, back.stdout + back.stderr
    chart.kubectl("delete", "daemonset", "--all", "-n", LEGACY_NAMESPACE)
    set_scope(chart, "all", whole_gpus=False)
