"""Issue 65: `scan --cluster`, `migrate status` and `check` read the cluster's facts through one
reader (cluster/state.cluster_policy: card sizes from the driver's ResourceSlices) and give one
answer, side by side on one real cluster (the shared 1.36 control plane, whose stand-in driver
publishes 24Gi and 80Gi cards). Before, `migrate status` said a gpumem-percentage StatefulSet
would be refused ("set hamiDraWebhook.deviceMemorySizes") that the webhook and `scan` convert,
and its GPU quotas' usage was "unknown"."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from hami_dra_webhook.cli.main import main
from tests.support.cluster import Cluster, wait_for

pytestmark = pytest.mark.plane  # the shared control plane (tests/conftest.py)


def _cli(kube: Cluster, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    kubeconfig = str(kube.plane.admin_kubeconfig)
    code = main([*args, "--kubeconfig", kubeconfig], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _stateful_set(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "serviceName": name,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "infer",
                            "image": "registry.example/infer:1",
                            "resources": {
                                "limits": {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 25}
                            },
                        }
                    ]
                },
            },
        },
    }


def _bare_pod() -> dict[str, Any]:
    limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bare"},
        "spec": {
            "containers": [{"name": "c", "image": "busybox", "resources": {"limits": limits}}]
        },
    }


QUOTA = {
    "apiVersion": "v1",
    "kind": "ResourceQuota",
    "metadata": {"name": "gpu"},
    "spec": {"hard": {"limits.nvidia.com/gpumem": "200000"}},
}


def test_scan_migrate_status_and_check_give_one_answer(kube: Cluster) -> None:
    namespace = kube.create_namespace("one-answer")
    kube.apply(QUOTA, namespace=namespace)
    kube.apply(_stateful_set("infer"), namespace=namespace)
    wait_for(lambda: kube.pods(namespace), "the StatefulSet's pod")
    kube.apply(_bare_pod(), namespace=namespace)  # kube-apiserver stores its 3000 as 3k
    _, out, err = _cli(kube, "scan", "--cluster", "-n", namespace, "-o", "json")
    scanned = json.loads(out)
    (workload,) = [w for w in scanned["workloads"] if w["kind"] == "StatefulSet"]
    assert workload["outcome"] == "converted", (workload, err)
    scan_quota = {(q["quota"], q["key"]): q["used"] for q in scanned["gpuQuotas"]}
    (bare,) = [w for w in scanned["workloads"] if w["name"] == "bare"]
    assert bare["containers"][0]["legacy"]["nvidia.com/gpumem"] == "3000", bare

    _, out, err = _cli(kube, "migrate", "status", "-o", "json")
    status = json.loads(out)
    mine = status["namespaces"][namespace]
    (pod,) = [p for p in mine["legacyPods"] if p["pod"] == "infer-0"]
    # Nothing keeps it from moving: it converts onto a DRA node (its card sizes known).
    assert pod["blocker"] == "", (pod, err)
    status_quota = {
        (q["quota"], q["key"]): q["used"] for q in status["quotas"] if q["namespace"] == namespace
    }
    assert status_quota == scan_quota, (status_quota, scan_quota)
    assert all(used is not None for used in status_quota.values()), status_quota

    _, out, _ = _cli(kube, "check", "-o", "json")
    quotas = [line for line in json.loads(out)["checks"] if line["check"] == "quotas"]
    assert not any("unknown" in line["detail"] and namespace in line["detail"] for line in quotas)
