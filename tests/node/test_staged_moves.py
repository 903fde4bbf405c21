"""The staged migration's moves that must evict or go in waves, on the real nodes (1.37): a
move to legacy evicts every holder of the driver's devices, and a two-node wave moves its
canary first under load. The pools, the scope, a move under load and one that fails closed
are test_staged_migration.py's; the set-up both share is staged.py's
(the legacy pool's stand-ins: tests/node/legacy.py).

The two-node wave test starts a third real kubelet for itself (`node-legacy-2`, a second
legacy node) and stops it after.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import pytest

from tests.node.conftest import (
    LEGACY_NODE,
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
    hami_webhook,
    legacy_slots,
    wait_legacy_served,
)
from tests.node.node import RealNode
from tests.node.staged import (
    OPT_IN,
    POOL,
    REPLICAS,
    SECOND_LEGACY,
    Timeline,
    apply,
    claim_users,
    cli,
    container_env,
    deployment,
    legacy_gpu_pod,
    legacy_limits,
    node_state,
    on_both,
    pinned,
    running_replicas,
    set_scope,
    wait_running,
)
from tests.node.workloads import limits_of, sleeping_pod
from tests.support.cluster import wait_for

pytestmark = pytest.mark.node  # the real node: runs beside the quiet tests
LEGACY_NODE_NEEDED = True  # the cluster gets the legacy-pool node (conftest.py)


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
        bridge = pinned(sleeping_pod("bridge", {"nvidia.com/gpu": 1}))
        apply(
            mixed, namespace, pinned(legacy_gpu_pod("unlabelled")), bridge, *claim_users(namespace)
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
        pods = on_both(mixed, namespace, pods)
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
