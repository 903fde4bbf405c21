"""A mixed cluster on the real control plane: NVIDIA GPUs, Hygon cards of two models and
Ascend 910B3 and 310P3 NPUs, their ResourceSlices shaped as each driver publishes them
(tests/controlplane/vendor_nodes.py). The chart is upgraded to convert Hygon, Ascend, AMD and
AWS Neuron; legacy manifests go through the webhook unchanged, and kube-scheduler allocates
each vendor's converted pods on the right devices with the right consumed capacity."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane.gpu_node import _expect
from tests.controlplane.vendor_nodes import ASCEND_NODE, HYGON, HYGON_NODE, HygonCard, VendorNode
from tests.e2e.test_gpu_quotas import _create_all, _gated, _quota, _settled
from tests.e2e.test_operations import _cli
from tests.support.cluster import Cluster, Release, wait_for
from tests.support.pods import gpu_pod
from tests.support.policies import EVERY_VENDOR

pytestmark = pytest.mark.e2e_on(capacity=True, versions=("1.36", "1.37"))

DEVICE_CONFIG = EVERY_VENDOR
# What the Hygon driver's deployment creates (deployments/static/hcu-dra-driver.yaml).
HYGON_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": HYGON},
    "spec": {
        "selectors": [
            {
                "cel": {
                    "expression": 'device.driver == "dra.hygon.com" &&'
                    ' device.attributes["dra.hygon.com"].type == "hcu"'
                }
            }
        ]
    },
}
K100, Z100 = HYGON_NODE.devices[0], HYGON_NODE.devices[1]
NPU_910B3, NPU_310P3 = ASCEND_NODE.devices[0], ASCEND_NODE.devices[1]


@pytest.fixture(scope="module")
def vendors(
    cluster: Cluster, hami: Release, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Release]:
    """The mixed cluster, the chart converting every vendor with a driver; afterwards the
    nodes are gone and the chart is back to its defaults."""
    folder = tmp_path_factory.mktemp("vendors")
    values = folder / "values.yaml"
    values.write_text(yaml.safe_dump({"deviceConfig": DEVICE_CONFIG}))
    for node in (HYGON_NODE, ASCEND_NODE):
        node.register(cluster.plane)
    cluster.apply(HYGON_CLASS, namespace="default")
    hami.values_file = values
    try:
        assert hami.upgrade().returncode == 0
        hami.restart()  # reads the new deviceConfig and the Hygon slices' compute units
        yield hami
    finally:
        hami.values_file = None
        hami.upgrade()
        hami.restart()
        cluster.kubectl("delete", "deviceclass", HYGON, "--ignore-not-found")
        for node in (HYGON_NODE, ASCEND_NODE):
            node.remove(cluster.plane)


def _pod(name: str, limits: dict[str, Any], annotations: dict[str, str] | None = None) -> Any:
    return gpu_pod(name, limits, annotations=annotations)


def _usage(cluster: Cluster, pod: dict[str, Any]) -> list[tuple[str, str, dict[str, str]]]:
    """(driver, device, consumed capacity) of every device the pod's claims got."""
    return [
        (r["driver"], r["device"], r.get("consumedCapacity", {})) for r in cluster.allocation(pod)
    ]


def _place(cluster: Cluster, namespace: str, pods: list[dict[str, Any]]) -> tuple[list, list]:
    cluster.apply({"apiVersion": "v1", "kind": "List", "items": pods}, namespace=namespace)
    placed, waiting = [], []
    for pod in pods:
        decided = cluster.wait_decided(namespace, pod["metadata"]["name"])
        (placed if cluster.scheduled(decided) else waiting).append(decided)
    return placed, waiting


def test_hygon_half_the_cores_is_half_of_each_models_compute_units(
    cluster: Cluster, vendors: Release, namespace: str
) -> None:
    # 50 % of a 120-CU card is 60 CUs, of a 128-CU card 64: two such pods fill each card.
    limits = {"hygon.com/dcunum": 1, "hygon.com/dcumem": 4096, "hygon.com/dcucores": 50}
    placed, waiting = _place(cluster, namespace, [_pod(f"half-{i}", limits) for i in range(5)])
    assert len(placed) == 4 and len(waiting) == 1
    usage = [u for pod in placed for u in _usage(cluster, pod)]
    assert Counter(device for _, device, _ in usage) == {K100.device_name: 2, Z100.device_name: 2}
    units = {K100.device_name: "60", Z100.device_name: "64"}
    for driver, device, consumed in usage:
        assert driver == HYGON
        assert consumed["cores"] == units[device] and consumed["memory"] == "4Gi"
    assert "hygon.com/dcucores" not in json.dumps(placed[0]["spec"])


def test_hygon_legacy_uuid_and_type_annotations_pick_the_card(
    cluster: Cluster, vendors: Release, namespace: str
) -> None:
    by_uuid = _pod(
        "by-uuid", {"hygon.com/dcunum": 1}, {"hygon.com/use-gpuuuid": f"DCU-{K100.serial}"}
    )
    by_type = _pod("by-type", {"hygon.com/hcunum": 1}, {"hygon.com/use-hcutype": "HCU-Z100"})
    placed, waiting = _place(cluster, namespace, [by_uuid, by_type])
    assert waiting == []
    (uuid_usage,) = _usage(cluster, placed[0])
    (type_usage,) = _usage(cluster, placed[1])
    assert uuid_usage[1] == K100.device_name and type_usage[1] == Z100.device_name
    # count only: no capacity asked, the driver's defaults take the whole card
    assert uuid_usage[2]["cores"] == "120" and uuid_usage[2]["memory"] == "64Gi"


def test_ascend_910b3_never_lands_on_a_310p3(
    cluster: Cluster, vendors: Release, namespace: str
) -> None:
    # Template mode: 2000 MiB is rounded up to vir05_1c_16g (16 GiB); the 910B3 holds four.
    limits = {"huawei.com/Ascend910B3": 1, "huawei.com/Ascend910B3-memory": 2000}
    pods = [_pod(f"b3-{i}", limits) for i in range(5)]
    pods.append(_pod("p3", {"huawei.com/Ascend310P": 1, "huawei.com/Ascend310P-memory": 2000}))
    placed, waiting = _place(cluster, namespace, pods)
    # The scheduler takes pods in its own order: any one of the five 910B3 pods is the fifth,
    # and it waits although the 310P3 beside it has room.
    waiting_names = [p["metadata"]["name"] for p in waiting]
    assert waiting_names in [[f"b3-{i}"] for i in range(5)], waiting_names
    assert "p3" in {p["metadata"]["name"] for p in placed}
    by_pod = {p["metadata"]["name"]: _usage(cluster, p) for p in placed}
    for name, usage in by_pod.items():
        ((driver, device, consumed),) = usage
        assert driver == "ascend.project-hami.io"
        if name == "p3":
            assert device == NPU_310P3.device_name and consumed == {"cores": "0", "memory": "3Gi"}
        else:
            assert device == NPU_910B3.device_name and consumed == {"cores": "0", "memory": "16Gi"}


def test_one_pod_with_nvidia_and_hygon_containers_gets_both(
    cluster: Cluster, vendors: Release, namespace: str
) -> None:
    """Each container converted by its own family's profile; the pod needs a node with both
    (for this test gpu-node-1 also publishes a Hygon card)."""
    both = VendorNode(
        cluster.node.name, HYGON, (HygonCard("0000:3a:00.0", "TPXS9", "K100_AI", 120, 64),)
    )
    _expect(
        cluster.plane.request(
            "POST", "/apis/resource.k8s.io/v1/resourceslices", both.resource_slice()
        ),
        201,
        "publish a Hygon slice on the GPU node",
    )
    try:
        pod = _pod("mixed", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 4000})
        pod["spec"]["containers"].append(
            {
                "name": "dcu",
                "image": pod["spec"]["containers"][0]["image"],
                "resources": {"limits": {"hygon.com/dcunum": 1, "hygon.com/dcumem": 2000}},
            }
        )
        (placed,), _ = _place(cluster, namespace, [pod])
        assert placed["spec"]["nodeName"] == cluster.node.name
        usage = sorted(_usage(cluster, placed))
        assert [driver for driver, _, _ in usage] == [HYGON, "hami-core-gpu.project-hami.io"]
        # cores and slices: the driver's defaults (all CUs, legacy's 100 %; one vHCU)
        assert usage[0][2] == {"memory": "2000Mi", "cores": "120", "slices": "1"}
        assert usage[1][2] == {"memory": "4000Mi", "cores": "0"}
    finally:  # the card goes before this test's namespace is released: free it first
        cluster.kubectl("delete", "pods", "--all", "-n", namespace, "--grace-period=0", "--force")
        wait_for(
            lambda: not cluster.get("resourceclaims", "-n", namespace)["items"],
            "the mixed pod's claims to be deleted",
        )
        cluster.plane.request(
            "DELETE",
            f"/apis/resource.k8s.io/v1/resourceslices/{both.resource_slice()['metadata']['name']}",
        )


def test_hygon_and_ascend_quotas_keep_limiting_converted_pods(
    cluster: Cluster, vendors: Release, namespace: str
) -> None:
    """HAMi's `limits.hygon.com/dcumem` and an Ascend chip's `-core` key (docs/quotas.md,
    "Other vendors"): converted pods are held until they fit. A whole Hygon card is charged
    the card's memory, which the webhook reads from the Hygon driver's ResourceSlices (64 GiB,
    the K100 the UUID annotation pins)."""
    hard = {"limits.hygon.com/dcumem": "70000", "limits.huawei.com/Ascend910B3-core": "50"}
    _quota(cluster, namespace, hard)
    whole = _pod("whole", {"hygon.com/dcunum": 1}, {"hygon.com/use-gpuuuid": K100.serial})
    cluster.apply(whole, namespace=namespace)
    _settled(cluster, namespace, 1, 1)  # 65536 of 70000: released
    share = {"hygon.com/dcunum": 1, "hygon.com/dcumem": 4000}
    npu = {
        "huawei.com/Ascend910B3": 1,
        "huawei.com/Ascend910B3-memory": 2000,
        "huawei.com/Ascend910B3-core": 20,
    }
    soft = {"huawei.com/vnpu-mode": "hami-core"}
    pods = [_pod(f"dcu-{i}", share) for i in range(2)]
    pods += [_pod(f"npu-{i}", npu, soft) for i in range(3)]
    _create_all(cluster, namespace, pods)
    # 65536 + 4000 fit 70000, a second 4000 does not; 20 + 20 cores fit 50, a third does not.
    settled = _settled(cluster, namespace, 4, 6)
    held = sorted(p["metadata"]["name"] for p in settled if _gated(p))
    assert len(held) == 2 and held[0].startswith("dcu-") and held[1].startswith("npu-"), held

    def told(name: str) -> str | None:
        events = cluster.get(
            "events", "-n", namespace, f"--field-selector=involvedObject.name={name}"
        )
        found = [e["message"] for e in events["items"] if "exceeded quota" in e["message"]]
        return found[0] if found else None

    assert (
        "requested: limits.hygon.com/dcumem=4000, used: limits.hygon.com/dcumem=69536,"
        " limited: limits.hygon.com/dcumem=70000"
    ) in wait_for(lambda: told(held[0]), "the held Hygon pod's Event")
    assert (
        "requested: limits.huawei.com/Ascend910B3-core=20, used:"
        " limits.huawei.com/Ascend910B3-core=40, limited: limits.huawei.com/Ascend910B3-core=50"
    ) in wait_for(lambda: told(held[1]), "the held Ascend pod's Event")


def test_a_vendor_without_a_driver_is_refused_with_its_name(
    cluster: Cluster, vendors: Release, namespace: str
) -> None:
    pod = _pod("mixed-mlu", {"nvidia.com/gpu": 1})
    pod["spec"]["containers"].append(
        {
            "name": "mlu",
            "image": "registry.example/mlu:1",
            "resources": {"limits": {"cambricon.com/vmlu": 1}},
        }
    )
    result = cluster.kubectl(
        "apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(pod), check=False
    )
    assert result.returncode != 0
    assert "Cambricon MLU has no DRA driver" in result.stderr


def test_check_reports_each_vendor_and_its_driver(
    cluster: Cluster, vendors: Release, tmp_path: Path
) -> None:
    config = tmp_path / "device-config.yaml"
    config.write_text(DEVICE_CONFIG)
    kubeconfig = str(cluster.plane.admin_kubeconfig)
    result = _cli("check", "--kubeconfig", kubeconfig, "--config", str(config), "-o", "json")
    lines = {line["check"]: line for line in json.loads(result.stdout)["checks"]}
    assert lines["Hygon DCU/HCU"]["level"] == "PASS", lines["Hygon DCU/HCU"]
    assert "2 devices on 1 node" in lines["Hygon DCU/HCU"]["detail"]
    assert lines["Huawei Ascend NPU"]["level"] == "PASS", lines["Huawei Ascend NPU"]
    # converted, but no AMD or Neuron driver publishes anything here
    assert lines["AMD GPU"]["level"] == "FAIL" and "no ResourceSlices" in lines["AMD GPU"]["detail"]
    assert lines["AWS Neuron device"]["level"] == "FAIL"
    # The default policy converts none of them: Hygon is present (label, slices), not converted.
    plain = _cli("check", "--kubeconfig", kubeconfig, "-o", "json")
    lines = {line["check"]: line for line in json.loads(plain.stdout)["checks"]}
    assert lines["Hygon DCU/HCU"]["level"] == "WARN"
    assert "not converted by this policy" in lines["Hygon DCU/HCU"]["detail"]
    assert "AMD GPU" not in lines
