"""A live cluster moved in stages on the real nodes (1.37): legacy HAMi and DRA side by side,
one node in each pool, namespace by namespace and node by node, and back.

The DRA pool is the first node (the chart's driver, its stand-in). The legacy pool is a second
real kubelet (`node-legacy`, its own containerd and mount namespace in the same network
namespace) served by legacy HAMi's STAND-INS (tests/node/legacy.py: its device plugin on the
kubelet's device-plugin API, `hami-scheduler` as a second real kube-scheduler with an extender
that leaves gpumem and gpucores to HAMi, its webhook). What they cannot show: HAMi's per-card
fit and HAMi-core's limits on the legacy side.

The chart runs with `migration.scope=namespaces` for this module (and `all` again after).

A move to DRA fails closed until the driver is ready. The moves that must evict every holder
of the driver's devices, and the two-node wave, are test_staged_moves.py's.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from hami_dra_webhook.core.model.quantity import parse_quantity
from tests.node.conftest import (
    LEGACY_NODE,
    NAMESPACE,
    RELEASE,
    NodeCluster,
    _release,
)
from tests.node.legacy import (
    CARDS,
    SPLIT,
    Extender,
    device_plugin_daemonset,
    hami_webhook,
    legacy_slots,
    wait_legacy_served,
)
from tests.node.legacy import NAMESPACE as LEGACY_NAMESPACE
from tests.node.staged import (
    LIMITS,
    NO_DRIVER_TAINT,
    OPT_IN,
    TOLERATE_GPU_NODES,
    apply,
    cli,
    container_env,
    deployment,
    driver_devices,
    gated,
    legacy_gpu_pod,
    legacy_limits,
    move_under_load,
    node_state,
    quota_used,
    released_memory,
    running_replicas,
    set_scope,
    wait_running,
)
from tests.node.workloads import limits_of, sleeping_pod
from tests.support.cluster import wait_for

pytestmark = pytest.mark.node  # the real node: runs beside the quiet tests
LEGACY_NODE_NEEDED = True  # the cluster gets the legacy-pool node (conftest.py)


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
                apply(mixed, namespace, legacy_gpu_pod("gpu"))
            converted = wait_running(mixed, opted, "gpu")
            kept = wait_running(mixed, legacy, "gpu")
            # The way back: A out of scope again, its next pod is legacy HAMi's.
            mixed.kubectl("label", "namespace", opted, f"{OPT_IN}-")
            apply(mixed, opted, legacy_gpu_pod("again"))
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


def test_a_node_moves_to_dra_under_load_and_back(mixed: NodeCluster, extender: Extender) -> None:
    """N legacy replicas on the legacy node (PDB maxUnavailable 1), their namespace opted in,
    a client creating GPU pods throughout: `migrate wave --to dra` (the legacy pool, its one
    node the canary) brings every replica back
    converted and Running with its legacy share, ready replicas never below N-1, no create
    fails, and the node is never served by both sides. Then the move back to legacy, killed
    mid-way and run again, resumes."""
    namespace = mixed.create_namespace("staged-move")
    with hami_webhook(mixed, "zz-hami-vgpu"):
        move_under_load(mixed, namespace)
    _release(mixed, namespace)


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
    whole = legacy_gpu_pod("whole")
    whole["spec"].pop("tolerations")  # the legacy node is tainted: the DRA node only
    whole["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": 1}
    shared = legacy_gpu_pod("shared")
    shared["spec"].pop("tolerations")
    try:
        with hami_webhook(mixed, "zz-hami-vgpu"):
            apply(mixed, namespace, whole, shared)
            apply(mixed, legacy, legacy_gpu_pod("gpu"))
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
            assert gated(mixed.pod(namespace, "extra"))
            mixed.kubectl("label", "namespace", namespace, f"{OPT_IN}=dra")
            samples: list[int] = []
            stop = threading.Event()

            def sample() -> None:
                while not stop.is_set():
                    samples.append(released_memory(mixed, namespace))
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
            assert gated(mixed.pod(namespace, "extra"))
            used = quota_used(mixed, namespace)["limits.nvidia.com/gpumem"]
            assert (used["used"], used["hard"], used["heldPods"]) == (hard, hard, 1), used
            print(f"quota through a move: {len(samples)} samples, max {max(samples)} of {hard}")
            back = cli(mixed, "migrate", "node", LEGACY_NODE, "--to", "legacy", "--timeout", "4m")
            assert back.returncode == 0, back.stdout + back.stderr
    finally:
        _release(mixed, namespace)


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
