"""`check`'s judging over plain data: a snapshot of a healthy cluster, then one thing made
untrue per case. No cluster: the snapshot is what `preflight.snapshot.gather` would read (its
reading is tested against the real kube-apiserver in tests/migrate/test_check.py)."""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

import pytest

from hami_dra_webhook.certs.pki import issue, service_names
from hami_dra_webhook.core.migration.pool_plan import Inventory
from hami_dra_webhook.core.migration.pools import Scope, node_gpus, slice_devices
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY, Policy, policy_from_yaml
from hami_dra_webhook.preflight.checks import judge
from hami_dra_webhook.preflight.report import Installation, Report
from hami_dra_webhook.preflight.snapshot import MISSING, Failed, Snapshot, UrlAnswer

DRIVER = "hami-core-gpu.project-hami.io"
TARGET = Installation()


def _gpu(index: int) -> dict[str, Any]:
    capacity = {"memory": {"value": "24Gi"}, "cores": {"value": "100"}}
    return {"name": f"hami-gpu-{index}", "capacity": capacity, "allowMultipleAllocations": True}


def _node(
    name: str, runtime: str = "containerd://2.1.4", slots: int = 0, **labels: str
) -> dict[str, Any]:
    status: dict[str, Any] = {"nodeInfo": {"containerRuntimeVersion": runtime}}
    if slots:
        status["allocatable"] = {"nvidia.com/gpu": str(slots)}
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true", **labels}},
        "status": status,
    }


def _inventory(nodes: list[dict[str, Any]], slices: list[dict[str, Any]]) -> Inventory:
    """The pools as preflight.snapshot reads them (cluster/moves/inventory.py), without pods."""
    devices = [d for s in slices for d in slice_devices(s)]
    gpus = {
        str(n["metadata"]["name"]): node_gpus(
            n, "nvidia.com/gpu", [d for d in devices if d.node == n["metadata"]["name"]]
        )
        for n in nodes
    }
    return Inventory(gpus, {}, [], {}, [], Scope())


def _pools(nodes: list[dict[str, Any]], slices: list[dict[str, Any]]) -> dict[str, Any]:
    """Snapshot changes: these nodes and slices, and the inventory read from them."""
    return {"nodes": nodes, "driver_slices": slices, "inventory": _inventory(nodes, slices)}


_SLICE = {"spec": {"driver": DRIVER, "nodeName": "gpu-1", "devices": [_gpu(0), _gpu(1)]}}
_PLUGIN_DS = {
    "metadata": {"name": "hami-device-plugin", "namespace": "kube-system"},
    "spec": {"template": {"spec": {
        "nodeSelector": {"gpu": "on"},
        "containers": [{"image": "projecthami/hami:v2.10.0"}],
    }}},
}  # fmt: skip
_KEPT_TO_LEGACY = {
    "requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {"key": "hami.io/gpu-pool", "operator": "In", "values": ["legacy"]}
                ]
            }
        ]
    }
}


def healthy() -> Snapshot:
    bundle = issue(service_names("hami-dra-webhook", "hami-system"))
    b64 = base64.b64encode
    return Snapshot(
        version={"gitVersion": "v1.36.3", "major": "1", "minor": "36"},
        dra_group={"resources": [{"name": "resourceclaimtemplates"}]},
        capacity_probe={
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [{"exactly": {"capacity": {"requests": {"cores": "1"}}}}]
                    }
                }
            }
        },
        device_class={
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}
        },
        device_classes=[],
        driver_slices=[
            {"spec": {"driver": DRIVER, "nodeName": "gpu-1", "devices": [_gpu(0), _gpu(1)]}}
        ],
        nodes=[_node("gpu-1")],
        driver_pods=[
            {
                "metadata": {"namespace": "hami-system"},
                "spec": {"nodeName": "gpu-1", "containers": [{"image": "r/driver@sha256:ab"}]},
                "status": {"phase": "Running"},
            }
        ],
        monitor_pods=[{"spec": {"nodeName": "gpu-1"}, "status": {"phase": "Running"}}],
        namespaces={"hami-system": {"metadata": {"labels": {}}}},
        daemonsets=[],
        deployments=[],
        webhook_configurations=[],
        quotas=[],
        webhook_configuration={"webhooks": [{"clientConfig": {"caBundle": bundle.ca_bundle}}]},
        preview_configuration={
            "webhooks": [
                {"name": n, "clientConfig": {"caBundle": bundle.ca_bundle}}
                for n in ("workloads.hami-dra-webhook.project-hami.io", "custom-workloads")
            ]
        },
        tls_secret={"data": {"tls.crt": b64(bundle.cert_pem).decode()}},
        endpoint_slices=[{"endpoints": [{"conditions": {"ready": True}}]}],
        inventory=_inventory([_node("gpu-1")], [_SLICE]),
    )


def _lines(snapshot: Snapshot, policy: Policy = DEFAULT_POLICY) -> dict[str, tuple[str, str]]:
    report: Report = judge(snapshot, policy, TARGET)
    return {line.check: (line.level, line.detail) for line in report.lines}


def test_a_healthy_cluster_passes_every_check() -> None:
    lines = _lines(healthy())
    assert {level for level, _ in lines.values()} == {"PASS"}, lines
    assert lines["driver"][1] == "2 shareable GPUs on 1 node"
    assert set(lines) == {
        "Kubernetes", "resource.k8s.io/v1", "consumable capacity", "DeviceClass", "driver",
        "driver pods", "node monitor", "driver version", "driver image", "devices",
        "container runtime", "pod security", "legacy HAMi", "GPU pools", "extended resources", "quotas",
        "webhook certificate", "webhook service", "workloads' preview",
    }  # fmt: skip
    assert lines["workloads' preview"][1] == (
        "kubectl apply of a workload says what its pods become (2 webhooks)"
    )


def test_the_workloads_preview_is_warned_about_when_missing_or_distrusting() -> None:
    lines = _lines(_with(preview_configuration=MISSING))
    assert lines["workloads' preview"][0] == "WARN"
    assert "no ValidatingWebhookConfiguration" in lines["workloads' preview"][1]
    other = issue(["elsewhere"]).ca_bundle
    stale = {"webhooks": [{"name": "workloads.x", "clientConfig": {"caBundle": other}}]}
    level, detail = _lines(_with(preview_configuration=stale))["workloads' preview"]
    assert level == "WARN" and detail.startswith("workloads.x of ValidatingWebhookConfiguration")


def _with(**changes: Any) -> Snapshot:
    return dataclasses.replace(healthy(), **changes)


@pytest.mark.parametrize(
    ("changes", "check", "level", "fragment"),
    [
        ({"version": {"gitVersion": "v1.34.4", "minor": "34"}}, "Kubernetes", "WARN", "1.34"),
        ({"dra_group": MISSING}, "resource.k8s.io/v1", "FAIL", "not served"),
        ({"dra_group": {"resources": []}}, "resource.k8s.io/v1", "FAIL", "without"),
        ({"capacity_probe": {"spec": {}}}, "consumable capacity", "FAIL", "drops capacity"),
        ({"capacity_probe": MISSING}, "consumable capacity", "WARN", "not probed: neither namespace"),
        ({"device_class": MISSING}, "DeviceClass", "FAIL", "does not exist"),
        ({"driver_slices": []}, "driver", "FAIL", "no ResourceSlices"),
        ({"nodes": [_node("gpu-1", "containerd://1.7.20")]}, "container runtime", "WARN", "off by default"),
        ({"nodes": [_node("gpu-1", "docker://28")]}, "container runtime", "FAIL", "no CDI"),
        ({"nodes": [_node("gpu-1"), _node("gpu-2")]}, "driver pods", "FAIL", "gpu-2"),
        ({"nodes": [_node("gpu-1"), _node("gpu-2")]}, "node monitor", "WARN", "without a running node monitor: gpu-2"),
        ({"monitor_pods": None}, "node monitor", "WARN", "not installed (monitor.enabled=false)"),
        ({"monitor_pods": Failed("403 Forbidden")}, "node monitor", "FAIL", "403"),
        (
            {"namespaces": {"hami-system": {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "baseline"}}}}},
            "pod security", "FAIL", "hami-system (baseline)",
        ),
        (
            {"deployments": [{"metadata": {"name": "hami-scheduler", "namespace": "kube-system"}}]},
            "legacy HAMi", "PASS", "running beside DRA, kept to the legacy pool: scheduler Deployment kube-system/hami-scheduler",
        ),
        (
            {"daemonsets": [_PLUGIN_DS]},
            "legacy HAMi", "FAIL", "kube-system/hami-device-plugin can run on DRA-pool nodes",
        ),
        (
            {"daemonsets": [{**_PLUGIN_DS, "spec": {"template": {"spec": {**_PLUGIN_DS["spec"]["template"]["spec"], "affinity": {"nodeAffinity": _KEPT_TO_LEGACY}}}}}]},
            "legacy HAMi", "PASS", "device plugin DaemonSet kube-system/hami-device-plugin",
        ),
        (
            {"daemonsets": [{**_PLUGIN_DS, "spec": {"template": {"spec": {**_PLUGIN_DS["spec"]["template"]["spec"], "nodeSelector": {"gpu": "on", "hami.io/gpu-pool": "legacy"}}}}}]},
            "legacy HAMi", "PASS", "device plugin DaemonSet kube-system/hami-device-plugin",
        ),
        (
            {
                "deployments": [{"metadata": {"name": "hami-scheduler", "namespace": "kube-system"}}],
                "device_classes": [{"metadata": {"name": DRIVER}, "spec": {"extendedResourceName": "nvidia.com/gpu"}}],
            },
            "legacy HAMi", "FAIL", "hami-scheduler cannot place legacy pods",
        ),
        (
            _pools([_node("gpu-1", slots=40)], [_SLICE]),
            "GPU pools", "FAIL", "served by both HAMi's device plugin and the DRA driver: gpu-1;",
        ),
        (
            _pools([_node("gpu-1", **{"hami.io/gpu-pool": "dra"}), _node("gpu-2")], [_SLICE]),
            "GPU pools", "WARN", "GPU nodes in neither pool (nothing serves their GPUs): gpu-2",
        ),
        (
            _pools([_node("gpu-1", **{"hami.io/gpu-pool": "legacy"})], [_SLICE]),
            "GPU pools", "WARN", "gpu-1 (labelled legacy, served by dra)",
        ),
        (
            _pools([_node("gpu-1"), _node("gpu-2", slots=40, **{"hami.io/gpu-pool": "legacy"})], [_SLICE]),
            "GPU pools", "PASS", "disjoint: 1 legacy node(s), 1 DRA node(s), no node in both",
        ),
        (
            _pools([_node("gpu-1"), _node("gpu-2", slots=40, **{"hami.io/gpu-pool": "legacy"})], [_SLICE]),
            "driver pods", "PASS", "running on all 1 GPU node(s)",
        ),
        ({"inventory": Failed("500 InternalError: x")}, "GPU pools", "FAIL", "500 InternalError"),
        (
            {"device_classes": [{"metadata": {"name": "gpus"}, "spec": {"extendedResourceName": "nvidia.com/gpu"}}]},
            "extended resources", "WARN", "gpus (nvidia.com/gpu)",
        ),
        (
            {"quotas": [{"metadata": {"name": "q", "namespace": "a"}, "spec": {"hard": {"limits.nvidia.com/gpumem": "1"}}}]},
            "quotas", "WARN", "a/q (limits.nvidia.com/gpumem)",
        ),
        ({"tls_secret": {"data": {}}}, "webhook certificate", "FAIL", "no tls.crt"),
        ({"endpoint_slices": []}, "webhook service", "FAIL", "no ready endpoint"),
        ({"webhook_configuration": MISSING}, "webhook", "FAIL", "does not exist"),
        ({"webhook_url": UrlAnswer("https://127.0.0.1:1/mutate", status=503)}, "webhook url", "FAIL", "503"),
        ({"webhook_url": UrlAnswer("https://x/mutate", unreachable="refused")}, "webhook url", "WARN", "refused"),
        ({"quotas": Failed("403 forbidden")}, "quotas", "FAIL", "the API failed: 403 forbidden"),
        (
            {"driver_pods": [{"metadata": {"namespace": "hami-system"}, "spec": {"nodeName": "gpu-1"}, "status": {"phase": "Pending"}}]},
            "driver pods", "WARN", "not running: gpu-1 (Pending)",
        ),
        (
            {"driver_slices": [{"spec": {"driver": DRIVER, "nodeName": "gpu-1", "devices": [{"name": "gpu-0", "capacity": {"memory": {"value": "1Gi"}, "cores": {"value": "100"}}, "allowMultipleAllocations": True}]}}]},
            "devices", "FAIL", "no hami-gpu-N devices published by",
        ),
        (
            {"device_class": {"spec": {"selectors": [{"cel": {"expression": "true"}}]}}},
            "DeviceClass", "FAIL", "does not select",
        ),
        (
            {"driver_slices": [{"spec": {"driver": DRIVER, "nodeName": "gpu-1", "devices": [{"name": "hami-gpu-0", "capacity": {"memory": {"value": "1Gi"}, "cores": {"value": "100"}}}]}}]},
            "driver", "FAIL", "not multi-allocatable on gpu-1",
        ),
        (
            {"driver_slices": [{"spec": {"driver": DRIVER, "nodeName": "gpu-1", "devices": [{"name": "hami-gpu-0", "capacity": {"memory": {"value": "1Gi"}}, "allowMultipleAllocations": True}]}}]},
            "driver", "FAIL", "without memory/cores capacity on gpu-1",
        ),
        (
            {"daemonsets": [{"metadata": {"name": "ds", "namespace": "n"}, "spec": {"template": {"spec": {"containers": [{"image": "projecthami/hami:v2.10.0"}]}}}}]},
            "legacy HAMi", "FAIL", "n/ds can run on DRA-pool nodes",
        ),
        (
            {"webhook_configurations": [{"metadata": {"name": "old"}, "webhooks": [{"name": "vgpu.hami.io"}]}]},
            "legacy HAMi", "PASS", "webhook old",
        ),
        (
            {"webhook_configuration": {"webhooks": [{"clientConfig": {}}]}},
            "webhook certificate", "FAIL", "no caBundle yet",
        ),
        (
            {"webhook_configuration": {"webhooks": [{"clientConfig": {"caBundle": issue(["x"]).ca_bundle}}]}},
            "webhook certificate", "FAIL", "does not verify",
        ),
        (
            {"driver_pods": [{"metadata": {"namespace": "hami-system"}, "spec": {"nodeName": "gpu-1", "containers": [{"image": "r/k8s-dra-driver:v0.1.0"}]}, "status": {"phase": "Running"}}]},
            "driver version", "WARN", "k8s-dra-driver#45",
        ),
        (
            {"driver_pods": [{"metadata": {"namespace": "hami-system"}, "spec": {"nodeName": "gpu-1", "containers": [{"image": "r/k8s-dra-driver:v0.2.0"}]}, "status": {"phase": "Running"}}]},
            "driver image", "FAIL", "not pinned by a digest",
        ),
    ],
)  # fmt: skip
def test_one_thing_untrue_makes_its_line(
    changes: dict[str, Any], check: str, level: str, fragment: str
) -> None:
    found_level, detail = _lines(_with(**changes))[check]
    assert (found_level, fragment in detail) == (level, True), detail


def test_an_expiring_certificate_is_named() -> None:
    bundle = issue(
        service_names("hami-dra-webhook", "hami-system"),
        days=10,
    )
    b64 = base64.b64encode
    snapshot = _with(
        webhook_configuration={"webhooks": [{"clientConfig": {"caBundle": bundle.ca_bundle}}]},
        tls_secret={"data": {"tls.crt": b64(bundle.cert_pem).decode()}},
    )
    level, detail = _lines(snapshot)["webhook certificate"]
    assert level == "FAIL" and "expires in" in detail


VENDORS = policy_from_yaml(
    "hamiDraWebhook: {vendors: {hygon: {convert: true}, ascend: {convert: true}}}"
).policy


def test_each_vendor_present_or_converted_gets_a_line() -> None:
    hygon_node = {"metadata": {"name": "h1", "labels": {"hcu": "on"}}, "status": {}}
    cambricon_node = {
        "metadata": {"name": "m1", "labels": {}},
        "status": {"allocatable": {"cambricon.com/vmlu": "4"}},
    }
    slices = [
        {"spec": {"driver": "dra.hygon.com", "nodeName": "h1", "devices": [{"name": "hcu-1"}]}}
    ]
    snapshot = _with(
        nodes=[_node("gpu-1"), hygon_node, cambricon_node],
        vendor_slices={"dra.hygon.com": slices, "ascend.project-hami.io": []},
        vendor_classes={"dra.hygon.com": {"spec": {}}},
    )
    lines = _lines(snapshot, VENDORS)
    assert lines["Hygon DCU/HCU"] == ("PASS", "dra.hygon.com publishes 1 device on 1 node")
    assert (
        lines["Huawei Ascend NPU"][0] == "FAIL"
        and "no ResourceSlices" in lines["Huawei Ascend NPU"][1]
    )
    assert lines["Cambricon MLU"][0] == "WARN" and "no DRA driver" in lines["Cambricon MLU"][1]
    # Hygon's class missing: named
    missing_class = dataclasses.replace(snapshot, vendor_classes={"dra.hygon.com": MISSING})
    assert _lines(missing_class, VENDORS)["Hygon DCU/HCU"][0] == "FAIL"
    # not converted by the default policy: present, a warning that says how
    plain = _lines(snapshot)
    assert plain["Hygon DCU/HCU"][0] == "WARN"
    assert "not converted by this policy" in plain["Hygon DCU/HCU"][1]
    assert "Huawei Ascend NPU" not in plain
