"""Legacy manifests applied unchanged; kube-controller-manager makes the claims from our
templates and kube-scheduler allocates them on the GPU node (two 24 GiB L4, one 80 GiB A100)
with the capacity the legacy request meant."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import Cluster, Release
from tests.support.pods import gpu_pod
from tests.support.shared import shared_path

pytestmark = pytest.mark.e2e_on(capacity=True)
# kube-scheduler 1.34's alpha allocator does not place these (see test_alpha_allocator_of_1_34).
SHARING_WORKS = pytest.mark.e2e_on(capacity=True, versions=("1.35", "1.36", "1.37"))
EXAMPLES = Path(__file__).parents[2] / "examples"
L4 = ("hami-gpu-0", "hami-gpu-1")
A100 = "hami-gpu-2"


def hami_example(name: str) -> Path:
    """One of HAMi's examples, read from ../shared (tests/support/shared.py)."""
    return shared_path("hami-examples", "nvidia", name, what="HAMi's examples")


def _decided(cluster: Cluster, namespace: str, names: list[str]) -> dict[str, dict[str, Any]]:
    return {name: cluster.wait_scheduled(namespace, name) for name in names}


def _device_usage(cluster: Cluster, pod: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(device, consumed memory, consumed cores) of each device the pod's claims got."""
    return [
        (r["device"], r["consumedCapacity"]["memory"], r["consumedCapacity"]["cores"])
        for r in cluster.allocation(pod)
    ]


@SHARING_WORKS
def test_gpumem_pods_fill_each_card_then_stay_pending(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    # 8 x 3000 MiB fit a 24 GiB card, 9 do not: 16 pods fill the two L4 cards, the 17th waits.
    only_l4 = {"nvidia.com/use-gputype": "L4"}
    names = [f"share-{i}" for i in range(17)]
    pods = [gpu_pod(n, {"nvidia.com/gpumem": 3000}, annotations=only_l4) for n in names]
    cluster.apply({"apiVersion": "v1", "kind": "List", "items": pods}, namespace=namespace)
    placed, waiting = [], []
    for name in names:
        pod = cluster.wait_decided(namespace, name)
        (placed if cluster.scheduled(pod) else waiting).append(pod)
    assert len(placed) == 16 and len(waiting) == 1
    usage = [u for pod in placed for u in _device_usage(cluster, pod)]
    assert Counter(device for device, _, _ in usage) == {L4[0]: 8, L4[1]: 8}
    assert {(memory, cores) for _, memory, cores in usage} == {("3000Mi", "0")}
    message = next(c for c in waiting[0]["status"]["conditions"] if c["type"] == "PodScheduled")
    assert "cannot allocate all claims" in message["message"]


def test_two_gpus_are_two_different_devices(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    """HAMi's default_use_legacy.yaml: 2 GPUs, each whole (all its memory and SMs)."""
    cluster.kubectl("apply", "-n", namespace, "-f", str(hami_example("default_use_legacy.yaml")))
    pod = cluster.wait_scheduled(namespace, "gpu-pod")
    usage = _device_usage(cluster, pod)
    assert len(usage) == 2
    assert len({device for device, _, _ in usage}) == 2
    for device, memory, cores in usage:
        assert (memory, cores) == (f"{cluster.node.by_device(device).memory_gib}Gi", "100")


def test_hami_default_example_shares_one_card(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    """HAMi's default_use.yaml (v2.10): 1 GPU, 3000 MiB and 30 % of it."""
    cluster.kubectl("apply", "-n", namespace, "-f", str(hami_example("default_use.yaml")))
    pod = cluster.wait_scheduled(namespace, "gpu-pod")
    assert [(memory, cores) for _, memory, cores in _device_usage(cluster, pod)] == [
        ("3000Mi", "30")
    ]


def test_gpu_type_and_uuid_annotations_choose_and_avoid_devices(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    uuids = {gpu.device_name: gpu.uuid for gpu in cluster.node.gpus}
    avoid = f"{uuids[L4[0]]}, {uuids[A100]}"
    pods = [
        gpu_pod("a100", {"nvidia.com/gpumem": 1000}, {"nvidia.com/use-gputype": "A100"}),
        gpu_pod("not-l4", {"nvidia.com/gpumem": 1000}, {"nvidia.com/nouse-gputype": "L4"}),
        gpu_pod("avoid", {"nvidia.com/gpumem": 1000}, {"nvidia.com/nouse-gpuuuid": avoid}),
        gpu_pod("this-one", {"nvidia.com/gpumem": 1000}, {"nvidia.com/use-gpuuuid": uuids[L4[1]]}),
    ]
    cluster.apply({"apiVersion": "v1", "kind": "List", "items": pods}, namespace=namespace)
    placed = _decided(cluster, namespace, ["a100", "not-l4", "avoid", "this-one"])
    devices = {name: [d for d, _, _ in _device_usage(cluster, pod)] for name, pod in placed.items()}
    assert devices == {"a100": [A100], "not-l4": [A100], "avoid": [L4[1]], "this-one": [L4[1]]}


def test_hami_card_type_example_needs_two_such_cards(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    """HAMi's specify_card_type_to_use.yaml asks for 2 GPUs of type A100 or V100; the node has
    one A100, so, as in legacy HAMi, the pod cannot be placed."""
    example = hami_example("specify_card_type_to_use.yaml")
    cluster.kubectl("apply", "-n", namespace, "-f", str(example))
    cluster.wait_unschedulable(namespace, "gpu-pod")


@SHARING_WORKS
def test_memory_percentage_takes_the_alternative_of_each_card_size(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    half = {"nvidia.com/gpumem-percentage": 50, "nvidia.com/gpucores": 20}
    pods = [
        gpu_pod("half-a100", half, {"nvidia.com/use-gputype": "A100"}),
        gpu_pod("half-l4", half, {"nvidia.com/use-gputype": "L4"}),
    ]
    cluster.apply({"apiVersion": "v1", "kind": "List", "items": pods}, namespace=namespace)
    placed = _decided(cluster, namespace, ["half-a100", "half-l4"])
    [a100] = cluster.allocation(placed["half-a100"])
    [l4] = cluster.allocation(placed["half-l4"])
    assert (a100["request"], a100["device"]) == ("gpu/mem-80gi", A100)
    assert a100["consumedCapacity"] == {"memory": "40Gi", "cores": "20"}
    assert (l4["request"], l4["device"]) == ("gpu/mem-24gi", l4["device"])
    assert l4["device"] in L4
    assert l4["consumedCapacity"] == {"memory": "12Gi", "cores": "20"}


def test_a_bare_gpu_takes_a_whole_card_that_nothing_can_join(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    first = {gpu.device_name: gpu.uuid for gpu in cluster.node.gpus}[L4[0]]
    pin = {"nvidia.com/use-gpuuuid": first}
    cluster.apply(gpu_pod("whole", {"nvidia.com/gpu": 1}, pin), namespace=namespace)
    whole = cluster.wait_scheduled(namespace, "whole")
    assert _device_usage(cluster, whole) == [(L4[0], "24Gi", "100")]
    for name, limits in (
        ("small", {"nvidia.com/gpumem": 1}),
        ("no-cores", {"nvidia.com/gpucores": 0}),
    ):
        cluster.apply(gpu_pod(name, limits, pin), namespace=namespace)
        cluster.wait_unschedulable(namespace, name)


@SHARING_WORKS
def test_the_example_deployment_runs_unchanged(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "deployment.yaml"))
    pods = cluster.wait_for_pods(namespace, "app=inference", 3)
    usage = []
    for pod in pods:
        assert (
            "schedulerName" not in pod["spec"]
            or pod["spec"]["schedulerName"] == "default-scheduler"
        )
        usage += _device_usage(cluster, cluster.wait_scheduled(namespace, pod["metadata"]["name"]))
    assert {(memory, cores) for _, memory, cores in usage} == {("16Gi", "50")}
    # 16 GiB and 50 % each: one per L4 card at most, two on the A100.
    per_device = Counter(device for device, _, _ in usage)
    assert all(per_device[d] <= 1 for d in L4) and per_device[A100] <= 2
    templates = cluster.get("resourceclaimtemplates", "-n", namespace)["items"]
    assert len(templates) == 1, "the replicas share one template"


@SHARING_WORKS
def test_hami_memory_fraction_example_halves_each_card(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    """HAMi's use_memory_fraction.yaml: 2 GPUs, half the memory and 30 % of each."""
    cluster.kubectl("apply", "-n", namespace, "-f", str(hami_example("use_memory_fraction.yaml")))
    pod = cluster.wait_scheduled(namespace, "gpu-pod")
    results = cluster.allocation(pod)
    assert len({r["device"] for r in results}) == 2
    for result in results:
        size = cluster.node.by_device(result["device"]).memory_gib
        assert result["request"].endswith(f"/mem-{size}gi")
        assert result["consumedCapacity"] == {"memory": f"{size // 2}Gi", "cores": "30"}


@pytest.mark.e2e_on(capacity=True, versions=("1.34",))
def test_alpha_allocator_of_1_34(cluster: Cluster, hami: Release, namespace: str) -> None:
    """What kube-scheduler 1.34.4 does with DRAConsumableCapacity on (alpha), as observed, one
    pod at a time: a claim whose firstAvailable alternatives request capacity is never placed,
    even on an empty card; and once one card's memory is fully consumed, no further shared claim
    is placed on the node at all, although two cards are still empty. The templates are the same
    ones 1.35-1.37 place correctly (the tests above), so the README tells 1.34 users to share GPUs
    on 1.35 or later, and `check` warns. If this test fails, 1.34 got fixed: move it back into
    SHARING_WORKS."""
    half = {"nvidia.com/gpumem-percentage": 50, "nvidia.com/gpucores": 20}
    steps = [
        ("half-a100", half, {"nvidia.com/use-gputype": "A100"}, False),
        ("whole-l4-memory", {"nvidia.com/gpumem": 24576}, {"nvidia.com/use-gputype": "L4"}, True),
        ("small-l4", {"nvidia.com/gpumem": 1000}, {"nvidia.com/use-gputype": "L4"}, False),
        ("small-a100", {"nvidia.com/gpumem": 1000}, {"nvidia.com/use-gputype": "A100"}, False),
    ]
    for name, limits, choice, placed in steps:
        cluster.apply(gpu_pod(name, limits, choice), namespace=namespace)
        assert cluster.scheduled(cluster.wait_decided(namespace, name)) is placed, name
