"""`check`: every PASS, WARN and FAIL line, against the kube-apiserver stand-in."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from hami_dra_webhook.certs import issue, service_names
from hami_dra_webhook.cli.main import main
from tests.apiserver_standin import StandIn
from tests.test_admit import resource_slice

DRA = "/apis/resource.k8s.io/v1"
DRIVER = "hami-core-gpu.project-hami.io"
NS = "hami-system"


def healthy(standin: StandIn, days: int = 365) -> None:
    standin.static[DRA] = {
        "kind": "APIResourceList",
        "groupVersion": "resource.k8s.io/v1",
        "resources": [
            {"name": "resourceclaimtemplates", "namespaced": True, "kind": "ResourceClaimTemplate"}
        ],
    }
    standin.static[f"{DRA}/deviceclasses/{DRIVER}"] = {
        "metadata": {"name": DRIVER},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }
    standin.resource_slices = [
        resource_slice("gpu-node-1", DRIVER, ["85899345920", "80Gi"]),
        resource_slice("gpu-node-2", DRIVER, ["40Gi"]),
    ]
    standin.static["/apis/apps/v1/daemonsets"] = [
        {
            "metadata": {"name": "hami-dra-webhook-driver", "namespace": NS},
            "spec": {
                "template": {
                    "spec": {
                        "containers": [{"image": "docker.io/projecthami/k8s-dra-driver:v0.1.0"}]
                    }
                }
            },
        }
    ]
    standin.static["/apis/apps/v1/deployments"] = [
        {
            "metadata": {"name": "hami-dra-webhook", "namespace": NS},
            "spec": {"template": {"spec": {"containers": [{"image": "x/hami-dra-webhook:0.1.0"}]}}},
        }
    ]
    standin.static["/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"] = []
    standin.static["/api/v1/resourcequotas"] = [
        {"metadata": {"name": "cpu", "namespace": "ml"}, "spec": {"hard": {"requests.cpu": "10"}}}
    ]
    bundle = issue(service_names("hami-dra-webhook", NS), days=days)
    standin.webhook_configurations["hami-dra-webhook"] = {
        "metadata": {"name": "hami-dra-webhook", "resourceVersion": "1"},
        "webhooks": [
            {
                "name": "hami-dra-webhook.project-hami.io",
                "clientConfig": {"caBundle": bundle.ca_bundle},
            }
        ],
    }
    standin.secrets[(NS, "hami-dra-webhook-tls")] = {
        "metadata": {"name": "hami-dra-webhook-tls", "namespace": NS, "resourceVersion": "1"},
        "data": {"tls.crt": base64.b64encode(bundle.cert_pem).decode()},
    }
    standin.static[f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices"] = [
        {
            "metadata": {"name": "e", "labels": {"kubernetes.io/service-name": "hami-dra-webhook"}},
            "endpoints": [{"conditions": {"ready": True}}, {"conditions": {"ready": True}}],
        }
    ]


def check(standin: StandIn, folder: Path, *extra: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(
        ["check", "--kubeconfig", str(standin.kubeconfig(folder)), *extra], stdout=out, stderr=err
    )
    return code, out.getvalue(), err.getvalue()


def test_a_healthy_cluster_passes(standin: StandIn, tmp_path: Path) -> None:
    healthy(standin)
    code, out, _ = check(standin, tmp_path)
    assert code == 0, out
    lines = [line for line in out.splitlines() if line[:4] in ("PASS", "WARN", "FAIL")]
    assert len(lines) == 9 and all(line.startswith("PASS") for line in lines)
    assert "3 shareable GPUs on 2 nodes" in out
    assert "gpu-node-1                         2  yes        80Gi" in out
    assert "2 ready endpoint(s)" in out


def _quota(standin: StandIn) -> None:
    standin.static["/api/v1/resourcequotas"].append(
        {
            "metadata": {"name": "gpus", "namespace": "ml"},
            "spec": {"hard": {"requests.nvidia.com/gpu": "8", "limits.nvidia.com/gpumem": "64000"}},
        }
    )


BROKEN: dict[str, tuple[Callable[[StandIn], None], str, str]] = {
    "api-not-served": (lambda s: s.static.pop(DRA), "FAIL  resource.k8s.io/v1: not served", "1.34"),
    "capacity-dropped": (
        lambda s: setattr(s, "drop_capacity", True),
        "FAIL  consumable capacity",
        "DRAConsumableCapacity",
    ),
    "no-device-class": (
        lambda s: s.static.pop(f"{DRA}/deviceclasses/{DRIVER}"),
        "FAIL  DeviceClass: hami-core-gpu.project-hami.io does not exist",
        "deviceClass.create=true",
    ),
    "wrong-device-class": (
        lambda s: s.static[f"{DRA}/deviceclasses/{DRIVER}"]["spec"].update(
            selectors=[{"cel": {"expression": "true"}}]
        ),
        "FAIL  DeviceClass: hami-core-gpu.project-hami.io does not select",
        "CEL selector",
    ),
    "no-slices": (
        lambda s: setattr(s, "resource_slices", []),
        "FAIL  driver: no ResourceSlices",
        "DaemonSet",
    ),
    "not-shareable": (
        lambda s: s.resource_slices[0]["spec"]["devices"][0].pop("allowMultipleAllocations"),
        "FAIL  driver: devices not multi-allocatable on gpu-node-1",
        "DRAConsumableCapacity",
    ),
    "legacy-device-plugin": (
        lambda s: s.static["/apis/apps/v1/daemonsets"].append(
            {"metadata": {"name": "hami-device-plugin", "namespace": "kube-system"}}
        ),
        "FAIL  legacy HAMi: still running: device plugin DaemonSet kube-system/hami-device-plugin",
        "uninstall legacy HAMi",
    ),
    "missing-capacity": (
        lambda s: s.resource_slices[1]["spec"]["devices"][0]["capacity"].pop("cores"),
        "FAIL  driver: devices without memory/cores capacity on gpu-node-2",
        "v0.1.0",
    ),
    "legacy-scheduler": (
        lambda s: s.static["/apis/apps/v1/deployments"].append(
            {"metadata": {"name": "hami-scheduler", "namespace": "kube-system"}}
        ),
        "FAIL  legacy HAMi: still running: scheduler Deployment kube-system/hami-scheduler",
        "uninstall legacy HAMi",
    ),
    "no-ca-bundle": (
        lambda s: s.webhook_configurations["hami-dra-webhook"]["webhooks"][0]["clientConfig"].pop(
            "caBundle"
        ),
        "FAIL  webhook certificate: the webhook configuration has no caBundle yet",
        "restart",
    ),
    "legacy-webhook": (
        lambda s: s.static[
            "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
        ].append({"metadata": {"name": "hami-webhook"}, "webhooks": [{"name": "vgpu.hami.io"}]}),
        "FAIL  legacy HAMi: still running: webhook hami-webhook",
        "must not share",
    ),
    "extended-resource": (
        lambda s: s.device_classes.append(
            {
                "metadata": {"name": "gpu.nvidia.com"},
                "spec": {"extendedResourceName": "nvidia.com/gpu"},
            }
        ),
        "WARN  extended resources: DeviceClasses claim legacy names: gpu.nvidia.com (nvidia.com/gpu)",
        "remove extendedResourceName",
    ),
    "legacy-quota": (
        _quota,
        "WARN  quotas: ResourceQuotas count legacy resources",
        "deviceclass.resource.k8s.io/devices",
    ),
    "no-webhook": (
        lambda s: s.webhook_configurations.clear(),
        "FAIL  webhook: MutatingWebhookConfiguration hami-dra-webhook does not exist",
        "helm install",
    ),
    "wrong-ca": (
        lambda s: s.webhook_configurations["hami-dra-webhook"]["webhooks"][0][
            "clientConfig"
        ].update(caBundle=issue(["x"]).ca_bundle),
        "FAIL  webhook certificate: the caBundle does not verify",
        "restart",
    ),
    "no-endpoints": (
        lambda s: s.static.update(
            {f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices": []}
        ),
        "FAIL  webhook service: no ready endpoint",
        "failurePolicy",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_each_problem_has_its_line_and_fix(standin: StandIn, tmp_path: Path, case: str) -> None:
    healthy(standin)
    breaking, line, fix = BROKEN[case]
    breaking(standin)
    code, out, _ = check(standin, tmp_path)
    assert line in out, out
    assert "fix: " in out and fix in out
    assert code == (1 if line.startswith("WARN") else 2)


def test_expiring_certificate_fails(standin: StandIn, tmp_path: Path) -> None:
    healthy(standin, days=10)
    code, out, _ = check(standin, tmp_path)
    assert code == 2 and "the serving certificate expires in 9 days" in out


def test_json_output_and_unreachable_cluster(standin: StandIn, tmp_path: Path) -> None:
    healthy(standin)
    _quota(standin)
    code, out, _ = check(standin, tmp_path, "-o", "json")
    report = json.loads(out)
    assert code == 1 and report["worst"] == "WARN"
    assert {c["check"]: c["level"] for c in report["checks"]}["quotas"] == "WARN"
    assert [n["node"] for n in report["nodes"]] == ["gpu-node-1", "gpu-node-2"]
    kubeconfig = standin.kubeconfig(tmp_path)
    standin.stop()
    out_, err = io.StringIO(), io.StringIO()
    assert main(["check", "--kubeconfig", str(kubeconfig)], stdout=out_, stderr=err) == 3
    assert "did not answer" in err.getvalue()
