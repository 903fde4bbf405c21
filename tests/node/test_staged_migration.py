"""A live cluster moved in stages on the real nodes (1.37): legacy HAMi and DRA side by side,
one node in each pool, namespace by namespace and node by node, and back.

The DRA pool is the first node (the chart's driver, its stand-in). The legacy pool is a second
real kubelet (`node-legacy`, its own containerd and mount namespace in the same network
namespace) served by legacy HAMi's STAND-INS (tests/node/legacy.py: its device plugin on the
kubelet's device-plugin API, `hami-scheduler` as a second real kube-scheduler with an extender
that leaves gpumem and gpucores to HAMi, its webhook). What they cannot show: HAMi's per-card
fit and HAMi-core's limits on the legacy side.

The two-node wave test starts a third real kubelet for itself (`node-legacy-2`, a second
legacy node) and stops it after.

The chart runs with `migration.scope=namespaces` for this module (and `all` again after).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml

from hami_dra_webhook.core.model.quantity import parse_quantity
from tests.node.conftest import (
    DEVICE_CONFIG,
    LEGACY_NODE,
    NAMESPACE,
    RELEASE,
    SECOND_LEGACY_POD_IPS,
    NodeCluster,
    _release,
    binaries_or_skip,
)
from tests.node.creates import creating_pods
from tests.node.images import LocalImages
from tests.node.legacy import (
    CARDS,
    SPLIT,
    Extender,
    device_plugin_daemonset,
    hami_scheduler,
    hami_webhook,
    legacy_slots,
    wait_legacy_served,
)
from tests.node.legacy import NAMESPACE as LEGACY_NAMESPACE
from tests.node.node import RealNode
from tests.node.workloads import gpu_env, limits_of, sleeping_pod
from tests.support.chart_tools import CHART
from tests.support.cluster import wait_for

pytestmark = pytest.mark.node  # the real node: runs beside the quiet tests

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


def _sleeping_pod(name: str) -> dict[str, Any]:
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
    document = {"apiVersion": "v1", "kind": "List", "items": list(objects)}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(document))


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


@pytest.fixture(scope="module")
def mixed(chart: NodeCluster) -> Iterator[NodeCluster]:
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


@pytest.fixture(scope="module")
def extender(mixed: NodeCluster) -> Iterator[Extender]:
    """hami-scheduler running (with its extender stand-in) for the module's other tests."""
    with hami_scheduler(mixed.plane, mixed.folder) as running_extender:
        yield running_extender


def test_check_passes_on_disjoint_pools_and_names_a_node_in_both(mixed: NodeCluster) -> None:
    result = cli(mixed, "check", f"--webhook-namespace={NAMESPACE}", f"--release={RELEASE}")
    lines = {line.split(":")[0]: line for line in result.stdout.splitlines() if ":" in line}
    assert lines["PASS  GPU pools"].endswith(
        "disjoint: 1 legacy node(s), 1 DRA node(s), no node in both (migration scope: namespaces)"
    ), result.stdout
    assert "PASS  legacy HAMi: running beside DRA, kept to the legacy pool" in result.stdout
    assert f"legacy  1      {CARDS * SPLIT} nvidia.com/gpu" in result.stdout, result.stdout
    assert "dra     1      3 devices, 131072 MiB" in result.stdout, result.stdout
    (mixed.folder / "staged-check-pass.txt").write_text(result.stdout)

    # The legacy device plugin on the DRA node too: that node is in both pools.
    overlap = device_plugin_daemonset()
    overlap["metadata"]["name"] = "hami-device-plugin-overlap"
    spec = overlap["spec"]["template"]["spec"]
    spec["nodeSelector"] = {"kubernetes.io/hostname": mixed.node.name}
    labels = {"app.kubernetes.io/name": "overlap"}
    overlap["spec"]["selector"]["matchLabels"] = labels
    overlap["spec"]["template"]["metadata"]["labels"] = labels
    apply(mixed, LEGACY_NAMESPACE, overlap)
    try:
        wait_legacy_served(mixed, mixed.node.name)
        result = cli(mixed, "check", f"--webhook-namespace={NAMESPACE}", f"--release={RELEASE}")
        assert result.returncode == 2, result.stdout + result.stderr
        assert (
            "FAIL  GPU pools: served by both HAMi's device plugin and the DRA driver:"
            f" {mixed.node.name};"
        ) in result.stdout, result.stdout
        assert "hami-device-plugin-overlap can run on DRA-pool nodes" in result.stdout
        (mixed.folder / "staged-check-fail.txt").write_text(result.stdout)
    finally:
        mixed.kubectl("delete", "daemonset", "hami-device-plugin-overlap", "-n", LEGACY_NAMESPACE)
        wait_for(
            lambda: legacy_slots(mixed, mixed.node.name) == 0,
            "the DRA node without nvidia.com/gpu again",
            timeout=90,
        )


@pytest.mark.parametrize(
    "hami_first", [True, False], ids=["hami-webhook-first", "hami-webhook-last"]
)
def test_scope_sends_each_namespace_to_its_pool(
    mixed: NodeCluster, extender: Extender, hami_first: bool
) -> None:
    """Namespace A opted in, B not; HAMi's webhook registered before or after this one (both
    reinvoked IfNeeded): A's pod is converted and runs on the DRA node under kube-scheduler, B's
    keeps its legacy resources and runs on the legacy node under hami-scheduler. A taken out of
    scope again: its next pod is legacy."""
    opted, legacy = mixed.create_namespace("staged-in"), mixed.create_namespace("staged-out")
    mixed.kubectl("label", "namespace", opted, f"{OPT_IN}=dra")
    name = "0-hami-vgpu" if hami_first else "zz-hami-vgpu"
    assert (name < "hami-dra-webhook") == hami_first
    try:
        with hami_webhook(mixed, name) as webhook:
            for namespace in (opted, legacy):
                apply(mixed, namespace, _sleeping_pod("gpu"))
            converted = wait_running(mixed, opted, "gpu")
            kept = wait_running(mixed, legacy, "gpu")
            # The way back: A out of scope again, its next pod is legacy HAMi's.
            mixed.kubectl("label", "namespace", opted, f"{OPT_IN}-")
            apply(mixed, opted, _sleeping_pod("again"))
            again = wait_running(mixed, opted, "again")
        assert again["spec"]["schedulerName"] == "hami-scheduler"
        assert again["spec"]["nodeName"] == LEGACY_NODE and legacy_limits(again)
        assert converted["spec"].get("schedulerName", "default-scheduler") == "default-scheduler"
        assert converted["spec"]["nodeName"] == mixed.node.name
        assert converted["spec"]["resourceClaims"] and not legacy_limits(converted)
        assert limits_of(container_env(mixed, opted, "gpu")) == [("3000m", "30")]
        assert kept["spec"]["schedulerName"] == "hami-scheduler"
        assert kept["spec"]["nodeName"] == LEGACY_NODE
        assert not kept["spec"].get("resourceClaims")
        kept_limits = {k: int(parse_quantity(str(v))) for k, v in legacy_limits(kept).items()}
        assert kept_limits == LIMITS
        assert container_env(mixed, legacy, "gpu")["HAMI_LEGACY_STAND_IN"] == "1"
        assert webhook.seen.count("gpu pod") >= 1
        assert f"{legacy}/gpu" in extender.asked
    finally:
        _release(mixed, opted)
        _release(mixed, legacy)


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


def _legacy_replicas_opted_in(cluster: NodeCluster, namespace: str) -> None:
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


def _converted_replicas(cluster: NodeCluster, namespace: str) -> None:
    replicas = wait_for(lambda: running_replicas(cluster, namespace), "converted replicas", 180)
    for pod in replicas:
        assert pod["spec"]["resourceClaims"] and not legacy_limits(pod), pod["spec"]
        env = container_env(cluster, namespace, pod["metadata"]["name"])
        assert limits_of(env) == [("3000m", "30")], env
    assert node_state(cluster) == ("dra", False, "")
    assert driver_devices(cluster, LEGACY_NODE) > 0 and legacy_slots(cluster, LEGACY_NODE) == 0
    _cordon_carried(cluster)
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


def _cordon_carried(cluster: NodeCluster) -> None:
    """The cordoned card is one DeviceTaintRule (NoSchedule) of the driver's device with its
    UUID."""
    (rule,) = cordon_rules(cluster)
    rule["spec"]["taint"].pop("timeAdded", None)  # the server's
    assert rule["spec"] == {
        "deviceSelector": {"driver": DRIVER, "pool": LEGACY_NODE, "device": "hami-gpu-0"},
        "taint": {"key": CORDON, "value": "true", "effect": "NoSchedule"},
    }, rule


def _cordoned_card_unused(cluster: NodeCluster) -> None:
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


def _move_events_on_the_node(cluster: NodeCluster, namespace: str) -> None:
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


def _back_to_legacy_interrupted(cluster: NodeCluster, namespace: str) -> None:
    """The move back (a rollback): refused while a converted pod's claim is allocated on the
    node, naming it, and nothing done; allowed once that pod is gone. Then SIGKILLed once the
    node is drained, and run again: it resumes."""
    apply(cluster, namespace, _pinned(_sleeping_pod("held-here")))
    wait_running(cluster, namespace, "held-here")
    _cordoned_card_unused(cluster)
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


def test_a_node_moves_to_dra_under_load_and_back(mixed: NodeCluster, extender: Extender) -> None:
    """N legacy replicas on the legacy node (PDB maxUnavailable 1), their namespace opted in,
    a client creating GPU pods throughout: `migrate wave --to dra` (the legacy pool, its one
    node the canary) brings every replica back
    converted and Running with its legacy share, ready replicas never below N-1, no create
    fails, and the node is never served by both sides. Then the move back to legacy, killed
    mid-way and run again, resumes."""
    namespace = mixed.create_namespace("staged-move")
    with hami_webhook(mixed, "zz-hami-vgpu"):
        _move_under_load(mixed, namespace)
    _release(mixed, namespace)


def _move_under_load(mixed: NodeCluster, namespace: str) -> None:
    _legacy_replicas_opted_in(mixed, namespace)
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
        _move_events_on_the_node(mixed, namespace)
        _converted_replicas(mixed, namespace)
        creates.phase = "back"
        _back_to_legacy_interrupted(mixed, namespace)
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


def test_whole_gpus_are_left_to_kube_scheduler(mixed: NodeCluster, extender: Extender) -> None:
    """wholeGpusByExtendedResource (1.37: KEP-5004 GA): a count-only pod never reaches the
    webhook; kube-scheduler makes its claim from the DeviceClass's extendedResourceName and
    the container sees a whole card, as legacy HAMi's count-only request meant. A pod with
    gpumem beside the count is still converted.

    And what the node says against the issue's assumption: with a DeviceClass mapping
    nvidia.com/gpu, a 1.37 kube-scheduler's DynamicResources plugin refuses any pod that asks
    for that name and also for an extended resource no node advertises ("cannot fit
    resource"), whatever its extender ignores: hami-scheduler can no longer place legacy pods
    with gpumem. So the setting is for after the shared pods have moved (docs/migration.md)."""
    set_scope(mixed, "namespaces", whole_gpus=True)
    namespace = mixed.create_namespace("staged-whole")
    legacy = mixed.create_namespace("staged-whole-legacy")
    mixed.kubectl("label", "namespace", namespace, f"{OPT_IN}=dra")
    whole = _sleeping_pod("whole")
    whole["spec"].pop("tolerations")  # the legacy node is tainted: the DRA node only
    whole["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": 1}
    shared = _sleeping_pod("shared")
    shared["spec"].pop("tolerations")
    try:
        with hami_webhook(mixed, "zz-hami-vgpu"):
            apply(mixed, namespace, whole, shared)
            apply(mixed, legacy, _sleeping_pod("gpu"))
            pod = wait_running(mixed, namespace, "whole")
            converted = wait_running(mixed, namespace, "shared")
            refused = wait_for(
                lambda: (
                    "cannot fit resource"
                    in mixed.kubectl(
                        "get", "events", "-n", legacy, "--field-selector", "involvedObject.name=gpu"
                    ).stdout
                ),
                "hami-scheduler's verdict on a legacy gpumem pod",
                timeout=90,
            )
        assert not pod["spec"].get("resourceClaims"), pod["spec"]
        assert "hami.io/dra" not in (pod["metadata"].get("labels") or {})
        assert legacy_limits(pod) == {"nvidia.com/gpu": "1"}
        assert pod["status"].get("extendedResourceClaimStatus"), pod["status"]
        assert pod["spec"]["nodeName"] == mixed.node.name
        ((memory, cores),) = limits_of(container_env(mixed, namespace, "whole"))
        assert (memory, cores) in {("24576m", "100"), ("81920m", "100")}, (memory, cores)
        assert converted["spec"]["resourceClaims"] and not legacy_limits(converted)
        assert refused and mixed.pod(legacy, "gpu")["status"].get("phase") == "Pending"
    finally:
        _release(mixed, namespace)
        _release(mixed, legacy)
        set_scope(mixed, "namespaces", whole_gpus=False)


def _pinned(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod on the legacy node (now in the DRA pool), whatever else is free."""
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": LEGACY_NODE}
    pod["spec"]["tolerations"] = TOLERATE_GPU_NODES
    return pod


def _claim_users(namespace: str) -> list[dict[str, Any]]:
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
    own = _pinned(sleeping_pod("own", {}))
    own["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "mine"}]
    own["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    daemon_pod = _pinned(sleeping_pod("d", {}))
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


def test_a_move_to_legacy_evicts_every_holder_of_the_drivers_devices(mixed: NodeCluster) -> None:
    """Issue 46, finding 1, on the real node: a converted pod whose tenant removed its
    `hami.io/dra` label, a count-only pod given a whole card by the bridge (KEP-5004) and a pod
    with the tenant's own claim are evicted by a move to legacy; a DaemonSet's pod holding a
    claim (not evicted) keeps the move from going on: it stops with the node cordoned and still
    in the DRA pool (the driver must stay to release the claim), exit 3, naming the pod and the
    claim. Without it, the move resumes and ends with no claim of the driver allocated on the
    node."""
    set_scope(mixed, "namespaces", whole_gpus=True)
    namespace = mixed.create_namespace("staged-holders")
    mixed.kubectl("label", "namespace", namespace, f"{OPT_IN}=dra")
    try:
        moved = cli(mixed, "migrate", "node", LEGACY_NODE, "--to", "dra", "--timeout", "4m")
        assert moved.returncode == 0, moved.stdout + moved.stderr
        bridge = _pinned(sleeping_pod("bridge", {"nvidia.com/gpu": 1}))
        apply(
            mixed, namespace, _pinned(_sleeping_pod("unlabelled")), bridge, *_claim_users(namespace)
        )
        for name in ("unlabelled", "bridge", "own"):
            wait_running(mixed, namespace, name)
        mixed.kubectl("label", "pod", "unlabelled", "hami.io/dra-", "-n", namespace)
        assert mixed.pod(namespace, "bridge")["status"].get("extendedResourceClaimStatus")
        wait_for(
            lambda: [p for p in mixed.pods(namespace, "app=holder") if p["status"].get("phase") == "Running"],
            "the DaemonSet's pod running", 120,
        )  # fmt: skip

        # It stops at its timeout: 40 s is the steps before the wait (drained at 3.5 s here)
        # many times over, and no more idling than that (it was 90 s).
        stopped = cli(mixed, "migrate", "node", LEGACY_NODE, "--to", "legacy", "--force", "--timeout", "40s", "-o", "json")  # fmt: skip
        assert stopped.returncode == 3, stopped.stdout + stopped.stderr
        result = json.loads(stopped.stdout)
        assert result["moved"] is False and result["resumable"] is True, result
        assert "DaemonSet pod" in result["error"] and "is allocated on it" in result["error"], (
            result
        )
        assert {s["name"] for s in result["plan"]} >= {"unlabelled", "bridge", "own"}, result
        # Stopped before the label changed: the driver must stay to release the claim (a pod
        # with a claim cannot end on a node its driver has left).
        assert node_state(mixed) == ("dra", True, "cordoned")
        # kubectl shows where it stopped and why: the state's error, a Warning Event
        annotations = mixed.get("node", LEGACY_NODE)["metadata"]["annotations"]
        state = json.loads(annotations["hami.io/gpu-pool-move"])
        assert "DaemonSet pod" in state["error"] and state["startedAt"], state
        failed = mixed.get(
            "events", "-n", "default", f"--field-selector=involvedObject.name={LEGACY_NODE}"
        )["items"]
        assert any(e["reason"] == "GpuPoolMoveFailed" and e["type"] == "Warning" for e in failed)
        left = {
            p["metadata"]["name"]
            for p in mixed.pods(namespace)
            if not p["metadata"].get("deletionTimestamp")
        }
        assert not left & {"unlabelled", "bridge", "own"}, left
        (mixed.folder / "staged-holders-stopped.json").write_text(stopped.stdout)

        mixed.kubectl("delete", "daemonset", "holder", "-n", namespace)
        resumed = cli(mixed, "migrate", "node", LEGACY_NODE, "--to", "legacy", "--timeout", "4m", "-o", "json")  # fmt: skip
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert node_state(mixed) == ("legacy", False, "")
        claims = mixed.get("resourceclaims", "--all-namespaces")["items"]
        on_node = [
            c["metadata"]["name"]
            for c in claims
            for r in ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])
            if r.get("pool") == LEGACY_NODE
        ]  # fmt: skip
        assert not on_node, on_node
        assert legacy_slots(mixed, LEGACY_NODE) == CARDS * SPLIT
    finally:
        mixed.kubectl("delete", "daemonset", "holder", "-n", namespace, "--ignore-not-found")
        mixed.kubectl(
            "delete", "resourceclaim", "mine", "-n", namespace, "--ignore-not-found", "--wait=false"
        )
        _release(mixed, namespace)
        set_scope(mixed, "namespaces", whole_gpus=False)


SECOND_LEGACY = "node-legacy-2"


@pytest.fixture
def second_legacy(
    mixed: NodeCluster, node_images: LocalImages, node_minor: str
) -> Iterator[RealNode]:
    """A second legacy-pool node (its own kubelet and containerd, as node-legacy) for the
    two-node wave alone; stopped and its Node deleted after it (its pods go with it)."""
    node = RealNode(
        mixed.plane,
        binaries_or_skip(node_minor),
        mixed.folder / SECOND_LEGACY,
        name=SECOND_LEGACY,
        kubelet_port=10450,
        healthz_port=10458,
        pod_ips=SECOND_LEGACY_POD_IPS,
        kube_proxy=False,
        labels=("gpu=on", f"{POOL}=legacy"),
        taints=("nvidia.com/gpu=present:NoSchedule",),
    ).start(node_images)
    try:
        wait_legacy_served(mixed, SECOND_LEGACY)
        yield node
    finally:
        node.stop()
        mixed.kubectl("delete", "node", SECOND_LEGACY, "--wait=false")


def _on_both(
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


def test_a_two_node_wave_under_load_moves_the_canary_first(
    mixed: NodeCluster, extender: Extender, second_legacy: RealNode
) -> None:
    """Issue 48, on the real nodes: two legacy nodes, the replicas of a Deployment (PDB
    maxUnavailable 1) on them, their namespace opted in, a client creating GPU pods all along:
    `migrate wave --to dra --pool legacy --batch 1` moves the canary (the node with fewer GPU
    pods) alone first, then the other; every replica comes back converted and Running, ready
    replicas never below N-1, no create fails, neither node is ever served by both sides.
    Then both go back to legacy in one wave (no pod left to move)."""
    namespace = mixed.create_namespace("staged-wave")
    timelines = {node: Timeline(node=node) for node in (LEGACY_NODE, SECOND_LEGACY)}
    stop = threading.Event()
    with hami_webhook(mixed, "zz-hami-vgpu"):
        apply(mixed, namespace, *deployment("train"))
        pods = wait_for(lambda: running_replicas(mixed, namespace), "the legacy replicas", 180)
        pods = _on_both(mixed, namespace, pods)
        on = {p["spec"]["nodeName"] for p in pods}
        assert on <= {LEGACY_NODE, SECOND_LEGACY} and all(legacy_limits(p) for p in pods), on
        mixed.kubectl("label", "namespace", namespace, f"{OPT_IN}=dra")
        samplers = [
            threading.Thread(target=t.sample, args=(mixed, namespace, stop), daemon=True)
            for t in timelines.values()
        ]
        for sampler in samplers:
            sampler.start()
        started = time.monotonic()
        with creating_pods(mixed, namespace, max_seconds=600) as creates:
            moved = cli(
                mixed, "migrate", "wave", "--to", "dra", "--pool", "legacy", "--batch", "1",
                "--timeout", "8m",
            )  # fmt: skip
            move_seconds = time.monotonic() - started
            converted = wait_for(
                lambda: running_replicas(mixed, namespace), "converted replicas", 180
            )
        stop.set()
        for sampler in samplers:
            sampler.join(timeout=30)
    (mixed.folder / "staged-wave.txt").write_text(moved.stdout + moved.stderr)
    assert moved.returncode == 0, moved.stdout + moved.stderr
    by_node = {n: sum(1 for p in pods if p["spec"]["nodeName"] == n) for n in timelines}
    canary = min(by_node, key=lambda n: (by_node[n], n))
    other = next(n for n in by_node if n != canary)
    assert f"wave 1 (canary): {canary}" in moved.stdout, moved.stdout
    assert f"wave 2: {other}" in moved.stdout, moved.stdout
    assert "moved 2 node(s) in 2 wave(s)" in moved.stdout, moved.stdout
    assert moved.stdout.count("canaryPassed") == 2, moved.stdout
    assert "2 of 2 node(s) moved so far" in moved.stdout, moved.stdout
    for pod in converted:
        assert pod["spec"]["resourceClaims"] and not legacy_limits(pod), pod["spec"]
        env = container_env(mixed, namespace, pod["metadata"]["name"])
        assert limits_of(env) == [("3000m", "30")], env
    numbers = creates.numbers()
    ready = [s[4] for s in timelines[LEGACY_NODE].samples if s[0] <= move_seconds]
    summary = {
        "pods_moved": len(pods),
        "pods_by_node": by_node,
        "min_ready": min(ready),
        "creates": numbers,
        "move_seconds": round(move_seconds, 1),
        "timelines": {n: t.changes() for n, t in timelines.items()},
    }
    (mixed.folder / "staged-wave-summary.json").write_text(json.dumps(summary, indent=1))
    print("two-node wave:", json.dumps(summary))
    for timeline in timelines.values():
        assert not timeline.both(), timeline.both()
        assert not timeline.errors[:5], timeline.errors
    assert min(ready) >= REPLICAS - 1, summary
    assert numbers["failed"] == 0, numbers

    _release(mixed, namespace)
    back = cli(
        mixed, "migrate", "wave", "--to", "legacy", LEGACY_NODE, SECOND_LEGACY, "--batch", "2",
        "--no-canary", "--timeout", "4m",
    )  # fmt: skip
    assert back.returncode == 0, back.stdout + back.stderr
    assert "moved 2 node(s) in 1 wave(s)" in back.stdout, back.stdout
    assert node_state(mixed) == ("legacy", False, "")


NO_DRIVER_TAINT = "hami.io/test-no-driver"


def test_a_move_to_dra_fails_closed_until_the_driver_is_ready(mixed: NodeCluster) -> None:
    """Issue 48, on the real node: with the driver kept off the node (a taint its DaemonSet
    does not tolerate), a move to DRA waits for the driver's pod and, at its timeout, stops
    with the node cordoned and labelled dra (exit 3; the error, the state and a Warning Event
    say why). The taint removed, the same command resumes: the driver pod Ready and its slice
    published, a canary (a converted pod) runs on the still-cordoned node and sees the
    environment its claim means, then the node is uncordoned and the canary is gone. Then the
    node goes back to legacy."""
    mixed.kubectl("taint", "node", LEGACY_NODE, f"{NO_DRIVER_TAINT}=true:NoSchedule")
    try:
        # It stops at its timeout: 40 s is the steps before the wait for the driver (unserved
        # at about 12 s here) three times over (it was 75 s).
        stopped = cli(mixed, "migrate", "node", LEGACY_NODE, "--to", "dra", "--timeout", "40s", "-o", "json")  # fmt: skip
        assert stopped.returncode == 3, stopped.stdout + stopped.stderr
        result = json.loads(stopped.stdout)
        assert result["moved"] is False and result["resumable"] is True, result
        driver = "no driver pod (of the chart's DaemonSet hami-dra-webhook-driver"
        assert driver in result["error"], result
        assert node_state(mixed) == ("dra", True, "unserved")
        annotations = mixed.get("node", LEGACY_NODE)["metadata"]["annotations"]
        assert "no driver pod" in json.loads(annotations["hami.io/gpu-pool-move"])["error"]
    finally:
        mixed.kubectl("taint", "node", LEGACY_NODE, f"{NO_DRIVER_TAINT}-")
    resumed = cli(mixed, "migrate", "node", LEGACY_NODE, "--to", "dra", "--timeout", "4m", "-o", "json")  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    (mixed.folder / "staged-canary.json").write_text(resumed.stdout)
    timeline = json.loads(resumed.stdout)["timeline"]
    steps = [entry["step"] for entry in timeline]
    assert steps[0] == "resumed" and "canaryPassed" in steps, steps
    (passed,) = [e for e in timeline if e["step"] == "canaryPassed"]
    assert "CUDA_DEVICE_MEMORY_LIMIT_0=1000m, CUDA_DEVICE_SM_LIMIT_0=10" in str(passed), passed
    assert node_state(mixed) == ("dra", False, "")
    events = mixed.get(
        "events", "-n", "default", f"--field-selector=involvedObject.name={LEGACY_NODE}"
    )["items"]
    reasons = {e["reason"] for e in events}
    assert {"GpuPoolMoveFailed", "GpuPoolMoveCanary", "GpuPoolMoveCanaryPassed"} <= reasons
    wait_for(
        lambda: not mixed.get("pods", "-A", "-l", "hami.io/gpu-pool-canary")["items"] or None,
        "the canary pod gone", 60,
    )  # fmt: skip
    back = cli(mixed, "migrate", "node", LEGACY_NODE, "--to", "legacy", "--timeout", "4m")
    assert back.returncode == 0, back.stdout + back.stderr
    assert node_state(mixed) == ("legacy", False, "")
    wait_for(lambda: driver_devices(mixed, LEGACY_NODE) == 0, "no driver slice on it", 60)


def _quota_used(cluster: NodeCluster, namespace: str) -> dict[str, Any]:
    status = json.loads(cli(cluster, "migrate", "status", "-o", "json").stdout)
    return {q["key"]: q for q in status["quotas"] if q["namespace"] == namespace}


def test_a_namespace_keeps_its_gpu_quota_while_its_node_moves(
    mixed: NodeCluster, extender: Extender
) -> None:
    """Issue 47: a namespace with `limits.nvidia.com/gpumem: 9000` runs three 3000 MiB replicas
    legacy on the legacy node; a fourth pod (more than the quota) stays held. The node moves to DRA
    (the namespace opted in): the evicted replicas come back converted, each held until the
    pod it replaces is gone, so the released pods' memory never passes 9000 at any sample
    (legacy and converted counted together), the fourth stays held throughout, and
    `migrate status` shows 9000 used of 9000 at the end."""
    namespace = mixed.create_namespace("staged-quota")
    hard = 3 * 3000
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu"}}
    apply(mixed, namespace, {**quota, "spec": {"hard": {"limits.nvidia.com/gpumem": str(hard)}}})
    wait_for(
        lambda: mixed.get("namespace", namespace)["metadata"]["labels"].get("hami.io/gpu-quota"),
        "the quota namespace labelled",
    )
    try:
        with hami_webhook(mixed, "zz-hami-vgpu"):
            apply(mixed, namespace, *deployment("train"))
            wait_for(lambda: running_replicas(mixed, namespace), "the legacy replicas", 180)
            # More than the quota alone: never released, so it takes no replica's turn.
            extra = sleeping_pod(
                "extra", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": hard + 1},
                command="exec sleep 3600", tolerations=TOLERATE_GPU_NODES,
            )  # fmt: skip
            apply(mixed, namespace, extra)
            time.sleep(3)
            assert _gated(mixed.pod(namespace, "extra"))
            mixed.kubectl("label", "namespace", namespace, f"{OPT_IN}=dra")
            samples: list[int] = []
            stop = threading.Event()

            def sample() -> None:
                while not stop.is_set():
                    samples.append(_released_memory(mixed, namespace))
                    time.sleep(0.5)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            try:
                moved = cli(mixed, "migrate", "node", LEGACY_NODE, "--to", "dra", "--timeout", "8m")
                assert moved.returncode == 0, moved.stdout + moved.stderr
                replicas = wait_for(
                    lambda: running_replicas(mixed, namespace), "converted replicas", 180
                )
            finally:
                stop.set()
                sampler.join(timeout=30)
            assert all(p["spec"].get("resourceClaims") for p in replicas)
            assert max(samples) <= hard, samples
            assert _gated(mixed.pod(namespace, "extra"))
            used = _quota_used(mixed, namespace)["limits.nvidia.com/gpumem"]
            assert (used["used"], used["hard"], used["heldPods"]) == (hard, hard, 1), used
            print(f"quota through a move: {len(samples)} samples, max {max(samples)} of {hard}")
            back = cli(mixed, "migrate", "node", LEGACY_NODE, "--to", "legacy", "--timeout", "4m")
            assert back.returncode == 0, back.stdout + back.stderr
    finally:
        _release(mixed, namespace)


def _gated(pod: dict[str, Any]) -> bool:
    return any(
        g.get("name") == "hami.io/gpu-quota" for g in pod["spec"].get("schedulingGates") or []
    )


def _released_memory(cluster: NodeCluster, namespace: str) -> int:
    """The gpumem (MiB) of the namespace's released, live pods: a legacy pod's from its limits,
    a converted one's from its claim (3000 each here)."""
    total = 0
    for pod in cluster.pods(namespace):
        if _gated(pod) or pod["status"].get("phase") in ("Succeeded", "Failed"):
            continue
        if legacy_limits(pod):
            total += int(parse_quantity(str(legacy_limits(pod).get("nvidia.com/gpumem", 0))))
        elif pod["spec"].get("resourceClaims"):
            total += 3000
    return total
