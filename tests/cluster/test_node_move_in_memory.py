"""One node's move between the pools (cluster/moves/node.py: NodeMove), in process on the
in-memory API (tests/support/memory_api.py). What a real node does when its pool label changes
(the device plugin's DaemonSet leaves it, the chart's driver starts on it and publishes its
cards) is played by `NodeSide`, a stand-in that follows the label; the real kubelet, device
plugin stand-in and driver do it in tests/node/test_staged_migration.py, which also runs the
canary pod (left out here: nothing runs a pod in memory)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from hami_dra_webhook.cluster.moves.chart_driver import driver_name
from hami_dra_webhook.cluster.moves.node import NodeMove
from hami_dra_webhook.core.migration.move_state import MoveError
from hami_dra_webhook.core.migration.pools import MOVE_ANNOTATION, POOL_LABEL
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from hami_dra_webhook.kube.port import paths
from tests.core.migration.test_pools import legacy_pod, node, resource_slice
from tests.support.loop import run
from tests.support.memory_api import MemoryApi
from tests.support.told import Told

NODE, RELEASE, SYSTEM = "gpu-1", "hami-dra-webhook", "hami-system"
DRIVER = driver_name(RELEASE)


class NodeSide:
    """The node as its pool label makes it (a stand-in for the kubelet, HAMi's device plugin
    DaemonSet and the chart's driver DaemonSet): `legacy`, 10 virtual GPUs allocatable; `dra`,
    the driver's Ready pod and its ResourceSlice; anything else, neither."""

    def __init__(self, api: MemoryApi) -> None:
        self.api = api

    async def run(self) -> None:
        while True:
            await self.follow()
            await asyncio.sleep(0.01)

    async def follow(self) -> None:
        (item,) = [n for n in self.api.objects(paths.NODES) if n["metadata"]["name"] == NODE]
        label = item["metadata"]["labels"].get(POOL_LABEL, "")
        slots = "10" if label == "legacy" else "0"
        if item["status"].get("allocatable", {}).get("nvidia.com/gpu") != slots:
            item["status"]["allocatable"] = {"nvidia.com/gpu": slots}
            await self.api.replace_object(paths.NODES, item, timeout=1)
        driver_pods = self.api.objects(paths.pods(SYSTEM))
        slices = self.api.objects(paths.RESOURCE_SLICES)
        if label == "dra" and not driver_pods:
            self.api.put(paths.pods(SYSTEM), _driver_pod())
            self.api.put(
                paths.RESOURCE_SLICES, {**resource_slice(NODE, "24Gi"), "metadata": {"name": NODE}}
            )
        elif label != "dra" and driver_pods:
            self.api.delete(paths.pod(SYSTEM, "driver-x"))
            for found in slices:
                self.api.delete(f"{paths.RESOURCE_SLICES}/{found['metadata']['name']}")


def _driver_pod() -> dict[str, Any]:
    owner = {"kind": "DaemonSet", "name": DRIVER, "controller": True}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "driver-x", "ownerReferences": [owner]},
        "spec": {"nodeName": NODE, "serviceAccountName": DRIVER, "containers": [{"name": "d"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def _cluster() -> MemoryApi:
    api = MemoryApi()
    api.namespaces("default", "team", SYSTEM)
    api.put(
        paths.NODES, {"apiVersion": "v1", "kind": "Node", **node(NODE, slots=10, pool="legacy")}
    )
    subject = {"kind": "ServiceAccount", "namespace": SYSTEM, "name": DRIVER}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": DRIVER}, "subjects": [subject]}  # fmt: skip
    api.put(paths.cluster_role_binding(DRIVER).rsplit("/", 1)[0], binding)
    return api


def _move(api: MemoryApi, steps: Told, timeout: float = 10.0) -> Any:
    async def scenario() -> Any:
        side = asyncio.create_task(NodeSide(api).run())
        try:
            move = NodeMove(api, DEFAULT_POLICY, NODE, "dra", steps, timeout=timeout, poll=0.02,  # type: ignore[arg-type]
                            canary=False, release=RELEASE)  # fmt: skip
            return await move.run()
        finally:
            side.cancel()
            await asyncio.gather(side, return_exceptions=True)

    return run(scenario())


def test_an_empty_legacy_node_moves_to_dra_and_is_given_back() -> None:
    api, steps = _cluster(), Told()
    state = _move(api, steps)
    assert state.step == "done"
    assert steps.names == [
        "started",
        "cordoned",
        "drained",
        "relabelled",
        "unserved",
        "relabelled",
        "served",
        "done",
    ]
    (moved,) = api.objects(paths.NODES)
    assert moved["metadata"]["labels"][POOL_LABEL] == "dra"
    assert MOVE_ANNOTATION not in moved["metadata"].get("annotations", {})
    assert not moved["spec"].get("unschedulable")  # uncordoned: the move cordoned it
    reasons = [e["reason"] for e in _events(api)]
    assert reasons[:2] == ["GpuPoolMoveStarted", "GpuPoolMoveCordoned"]
    assert reasons[-1] == "GpuPoolMoveDone"


def test_a_pod_of_the_legacy_side_is_evicted_and_a_budget_that_forbids_it_stops_the_move() -> None:
    api, steps = _cluster(), Told()
    pod = legacy_pod("trainer", NODE, namespace="team")
    api.put(paths.pods("team"), {"apiVersion": "v1", "kind": "Pod", **pod})
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "keep", "namespace": "team"},
        "spec": {"selector": {"matchLabels": {"app": "a"}}},
        "status": {"disruptionsAllowed": 0},
    }
    api.put("/apis/policy/v1/namespaces/team/poddisruptionbudgets", budget)
    with pytest.raises(MoveError):
        _move(api, steps, timeout=0.5)
    (held,) = api.objects(paths.NODES)
    assert held["spec"]["unschedulable"] is True  # stopped: it stays cordoned, resumable
    assert "trainer" in [p["metadata"]["name"] for p in api.objects(paths.pods("team"))]
    assert "GpuPoolMoveFailed" in [e["reason"] for e in _events(api)]

    api.delete("/apis/policy/v1/namespaces/team/poddisruptionbudgets/keep")  # the owner lets go
    resumed = Told()
    assert _move(api, resumed).step == "done"  # resumed from the state on the Node
    assert api.objects(paths.pods("team")) == []


def _events(api: MemoryApi) -> list[dict[str, Any]]:
    """The Node's Events, in the order they were written."""
    found = api.objects(paths.events("default"))
    return sorted(found, key=lambda e: int(e["metadata"]["resourceVersion"]))
