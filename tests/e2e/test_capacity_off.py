"""DRAConsumableCapacity off (1.34/1.35 by default): kube-apiserver silently drops `capacity`
from claims and `allowMultipleAllocations` from slices. The webhook must notice, refuse what
would silently become whole GPUs, and still convert whole-GPU requests."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.support.cluster import Cluster, Release
from tests.support.pods import gpu_pod

pytestmark = pytest.mark.e2e_on(capacity=False)


def test_the_api_server_really_drops_capacity(cluster: Cluster, hami: Release) -> None:
    devices = cluster.stored_slice["spec"]["devices"]
    assert all("allowMultipleAllocations" not in device for device in devices)
    assert all("requestPolicy" not in device["capacity"]["memory"] for device in devices)
    status, body = hami.webhook.get("/readyz") if hami.webhook else (0, b"")
    assert status == 200
    assert json.loads(body)["consumableCapacity"] == "dropped"
    assert hami.metric("hami_dra_consumable_capacity_effective") == 0


def test_a_shared_gpu_pod_is_refused_with_how_to_fix_it(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    manifest = gpu_pod("shared", {"nvidia.com/gpumem": 3000, "nvidia.com/gpucores": 30})
    result = cluster.kubectl(
        "apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(manifest), check=False
    )
    assert result.returncode != 0
    assert "enable the DRAConsumableCapacity feature gate" in result.stderr
    assert cluster.pods(namespace) == []
    assert cluster.get("resourceclaimtemplates", "-n", namespace)["items"] == []


def test_whole_gpus_are_converted_and_allocated_whole(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    pods = [gpu_pod("two", {"nvidia.com/gpu": 2}), gpu_pod("one", {"nvidia.com/gpu": 1})]
    cluster.apply({"apiVersion": "v1", "kind": "List", "items": pods}, namespace=namespace)
    two = cluster.allocation(cluster.wait_scheduled(namespace, "two"))
    one = cluster.allocation(cluster.wait_scheduled(namespace, "one"))
    devices = [result["device"] for result in two + one]
    assert len(set(devices)) == 3, "every device is exclusive with the gate off"
    assert all("consumedCapacity" not in result for result in two + one)
    # The third whole GPU asked for finds no free device.
    cluster.apply(gpu_pod("three", {"nvidia.com/gpu": 1}), namespace=namespace)
    cluster.wait_unschedulable(namespace, "three")
    stored = cluster.get("resourceclaimtemplates", "-n", namespace)["items"]
    for template in stored:
        for request in template["spec"]["spec"]["devices"]["requests"]:
            assert "capacity" not in request["exactly"], "kube-apiserver dropped it"
    # Observed on 1.34.4: distinctAttribute survives with the gate off (the contract we started
    # from expected it dropped and the constraint then refused; docs/kubernetes-facts.md); the two-GPU claim is stored and allocated.
    [two_gpus] = [t for t in stored if len(t["spec"]["spec"]["devices"]["requests"]) == 2]
    [constraint] = two_gpus["spec"]["spec"]["devices"]["constraints"]
    assert constraint["distinctAttribute"] == "hami-core-gpu.project-hami.io/uuid"
