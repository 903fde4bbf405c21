"""The admission use case: operations, kinds, refusals, cluster safety, offline mode."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
from typing import Any

import jsonpatch
import pytest

from hami_dra_webhook.admit import Admission, Admitter
from hami_dra_webhook.cluster import ClusterState
from hami_dra_webhook.core.admission import parse_review
from hami_dra_webhook.core.policy import DEFAULT_POLICY, Policy, policy_from_mapping
from hami_dra_webhook.kube import KubernetesApi
from hami_dra_webhook.templates import ApiTemplateStore, OfflineTemplateStore
from tests.apiserver_standin import StandIn
from tests.reviews import gpu_pod, review


def admit(admitter: Admitter, document: dict[str, Any]) -> Admission:
    return asyncio.run(admitter.admit(parse_review(json.dumps(document).encode())))


def patched(document: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    ops = json.loads(base64.b64decode(answer["response"]["patch"]))
    return jsonpatch.apply_patch(document["request"]["object"], ops)


@pytest.fixture
def admitter(kube_api: KubernetesApi) -> Admitter:
    return Admitter(policy=DEFAULT_POLICY, store=ApiTemplateStore(kube_api), cluster=ClusterState())


def test_create_converts_creates_templates_and_echoes_uid(
    admitter: Admitter, standin: StandIn
) -> None:
    document = review(gpu_pod())
    result = admit(admitter, document)
    answer = result.body["response"]
    assert answer["uid"] == document["request"]["uid"] and answer["allowed"] is True
    assert answer["patchType"] == "JSONPatch"
    pod = patched(document, result.body)
    assert pod["spec"]["containers"][0]["resources"] == {
        "limits": {"cpu": "1"},
        "claims": [{"name": "cuda-gpu"}],
    }
    assert [key[1] for key in standin.templates] == result.templates
    assert answer["auditAnnotations"] == {"outcome": "converted", "templates": result.templates[0]}
    assert any("1 GPU, 4000Mi" in w for w in answer["warnings"])
    assert all(len(w) <= 120 for w in answer["warnings"])
    assert result.resources == ["nvidia.com/gpu", "nvidia.com/gpumem"]


def test_dry_run_admission_creates_nothing(admitter: Admitter, standin: StandIn) -> None:
    result = admit(admitter, review(gpu_pod(), dry_run=True))
    assert result.body["response"]["allowed"] is True and "patch" in result.body["response"]
    assert standin.templates == {}


def test_refused_pod_has_code_and_message(admitter: Admitter, standin: StandIn) -> None:
    result = admit(admitter, review(gpu_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "16Gi"})))
    answer = result.body["response"]
    assert answer["allowed"] is False and "patch" not in answer
    assert answer["status"]["code"] == 422 and "gpumem is in MiB" in answer["status"]["message"]
    assert standin.templates == {}


def test_update_strips_reapplied_legacy_keys_only(admitter: Admitter) -> None:
    converted = patched(review(gpu_pod()), admit(admitter, review(gpu_pod())).body)
    reapplied = copy.deepcopy(converted)
    reapplied["spec"]["containers"][0]["resources"]["limits"] |= {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpumem": "4000",
    }
    reapplied["metadata"]["labels"]["release"] = "2"
    document = review(reapplied, operation="UPDATE", old=converted)
    result = admit(admitter, document)
    assert patched(document, result.body) == converted | {"metadata": reapplied["metadata"]}
    # An update that does not bring legacy keys back is left as it is.
    plain = admit(admitter, review(converted, operation="UPDATE", old=converted)).body["response"]
    assert plain["allowed"] is True and "patch" not in plain


@pytest.mark.parametrize(
    "document",
    [
        review(gpu_pod(), operation="DELETE", old=gpu_pod()),
        review(gpu_pod(), operation="CONNECT"),
        review(
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}},
            kind="Deployment",
            group="apps",
            resource="deployments",
        ),
        review(
            {
                "kind": "Pod",
                "metadata": {"name": "x"},
                "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1"}}}]},
            }
        ),
    ],
    ids=["delete", "connect", "deployment", "pod-without-gpu"],
)
def test_other_operations_kinds_and_pods_pass_unchanged(
    admitter: Admitter, standin: StandIn, document: dict[str, Any]
) -> None:
    answer = admit(admitter, document).body["response"]
    assert answer["allowed"] is True and "patch" not in answer
    assert standin.count("POST", "templates") == 0


def test_capacity_dropped_refuses_sharing_but_not_whole_gpus(
    standin: StandIn, kube_api: KubernetesApi
) -> None:
    standin.drop_capacity = True
    cluster = ClusterState()
    asyncio.run(cluster.refresh(kube_api, DEFAULT_POLICY, "hami-system", timeout=2))
    assert cluster.capacity == "dropped" and cluster.api_answered
    admitter = Admitter(policy=DEFAULT_POLICY, store=ApiTemplateStore(kube_api), cluster=cluster)
    shared = admit(admitter, review(gpu_pod())).body["response"]
    assert shared["allowed"] is False and "DRAConsumableCapacity" in shared["status"]["message"]
    whole = admit(admitter, review(gpu_pod({"nvidia.com/gpu": "2"}))).body["response"]
    assert whole["allowed"] is True
    lenient = policy_from_mapping({"hamiDraWebhook": {"allowSharingWithoutCapacity": True}}).policy
    allowed = admit(
        Admitter(policy=lenient, store=ApiTemplateStore(kube_api), cluster=cluster),
        review(gpu_pod()),
    ).body["response"]
    assert allowed["allowed"] is True and any("whole GPUs" in w for w in allowed["warnings"])
    standin.drop_capacity = False
    asyncio.run(cluster.refresh(kube_api, DEFAULT_POLICY, "hami-system", timeout=2))
    assert cluster.capacity == "effective"


def test_probe_is_a_dry_run_and_deviceclass_mapping_warns(
    standin: StandIn, kube_api: KubernetesApi
) -> None:
    standin.device_classes = [
        {
            "metadata": {"name": "gpu.nvidia.com"},
            "spec": {"extendedResourceName": "nvidia.com/gpu"},
        },
        {"metadata": {"name": "other"}, "spec": {}},
    ]
    cluster = ClusterState()
    asyncio.run(cluster.refresh(kube_api, DEFAULT_POLICY, "hami-system", timeout=2))
    assert ("hami-system", "hami-dra-webhook-capacity-probe") not in standin.templates
    assert cluster.extended_resources == {"nvidia.com/gpu": "gpu.nvidia.com"}
    admitter = Admitter(policy=DEFAULT_POLICY, store=ApiTemplateStore(kube_api), cluster=cluster)
    warnings = admit(admitter, review(gpu_pod())).body["response"]["warnings"]
    assert any("DeviceClass gpu.nvidia.com also claims nvidia.com/gpu" in w for w in warnings)


def test_api_forbidden_refuses_the_pod(admitter: Admitter, standin: StandIn) -> None:
    standin.fail[("POST", "templates")] = 403
    answer = admit(admitter, review(gpu_pod())).body["response"]
    assert answer["allowed"] is False and answer["status"]["code"] == 500
    assert "RBAC" in answer["status"]["message"]


def test_budget_holds_when_the_api_hangs(standin: StandIn, kube_api: KubernetesApi) -> None:
    import time

    standin.delay[("POST", "templates")] = 5
    admitter = Admitter(policy=DEFAULT_POLICY, store=ApiTemplateStore(kube_api), budget=0.5)
    started = time.monotonic()
    answer = admit(admitter, review(gpu_pod())).body["response"]
    assert time.monotonic() - started < 1.5
    assert answer["allowed"] is False and answer["status"]["code"] in (503, 504)


def test_offline_store_answers_with_a_patch_and_says_so() -> None:
    policy: Policy = DEFAULT_POLICY
    result = admit(Admitter(policy=policy, store=OfflineTemplateStore()), review(gpu_pod()))
    answer = result.body["response"]
    assert answer["allowed"] is True and "patch" in answer
    assert any(
        w.startswith("offline webhook: ResourceClaimTemplate hami-gpu-") for w in answer["warnings"]
    )


def test_failed_cluster_checks_are_kept_for_the_metrics(
    standin: StandIn, kube_api: KubernetesApi
) -> None:
    standin.fail[("POST", "templates")] = 403
    cluster = ClusterState()
    asyncio.run(cluster.refresh(kube_api, DEFAULT_POLICY, "hami-system", timeout=2))
    assert cluster.capacity == "unknown" and cluster.api_answered
    assert cluster.failed_checks == [403] and "403" in cluster.last_error


def resource_slice(
    node: str, driver: str, sizes: list[str], kind: str = "hami-gpu"
) -> dict[str, Any]:
    """A ResourceSlice as the HAMi DRA driver publishes it (REFERENCE.md section 2)."""
    devices = [
        {
            "name": f"hami-gpu-{i}",
            "allowMultipleAllocations": True,
            "attributes": {
                "type": {"string": kind},
                "uuid": {"string": f"GPU-{node}-{i}"},
                "minor": {"int": i},
                "productName": {"string": "NVIDIA A100-SXM4-80GB"},
            },
            "capacity": {
                "cores": {
                    "value": "100",
                    "requestPolicy": {
                        "default": "100",
                        "validRange": {"min": "0", "max": "100", "step": "1"},
                    },
                },
                "memory": {
                    "value": size,
                    "requestPolicy": {
                        "default": size,
                        "validRange": {"min": "1Mi", "max": size, "step": "1Mi"},
                    },
                },
            },
        }
        for i, size in enumerate(sizes)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def test_memory_sizes_come_from_resource_slices(standin: StandIn, kube_api: KubernetesApi) -> None:
    driver = "hami-core-gpu.project-hami.io"
    standin.resource_slices = [
        resource_slice("node-a", driver, ["85899345920", "85899345920"]),  # 80Gi as NVML reports it
        resource_slice("node-b", driver, ["40Gi"]),
        resource_slice("node-c", "gpu.nvidia.com", ["24Gi"]),  # another driver: not ours
        resource_slice("node-d", driver, ["16Gi"], kind="mig"),  # not a hami-gpu device
    ]
    cluster = ClusterState()
    asyncio.run(cluster.refresh(kube_api, DEFAULT_POLICY, "hami-system", timeout=2))
    assert cluster.memory_sizes == (80 << 30, 40 << 30)
    admitter = Admitter(policy=DEFAULT_POLICY, store=ApiTemplateStore(kube_api), cluster=cluster)
    document = review(gpu_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "50"}))
    answer = admit(admitter, document).body["response"]
    assert answer["allowed"] is True, answer
    (template,) = standin.templates.values()
    alternatives = template["spec"]["spec"]["devices"]["requests"][0]["firstAvailable"]
    assert [a["capacity"]["requests"]["memory"] for a in alternatives] == ["40960Mi", "20480Mi"]
    # Without a cluster's sizes (and none configured), the same pod is refused with how to fix it.
    offline = admit(
        Admitter(policy=DEFAULT_POLICY, store=OfflineTemplateStore()),
        review(gpu_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "50"})),
    )
    assert (
        offline.body["response"]["allowed"] is False
        and "deviceMemorySizes" in offline.body["response"]["status"]["message"]
    )


def test_odd_metadata_without_request_namespace_is_no_crash() -> None:
    for metadata in ([1, 2], "x", {"namespace": 5}):
        document = review(gpu_pod(), namespace="")
        document["request"]["object"]["metadata"] = metadata
        answer = admit(
            Admitter(policy=DEFAULT_POLICY, store=OfflineTemplateStore()), document
        ).body["response"]
        assert answer["uid"] == document["request"]["uid"]
        assert answer["allowed"] is False or "patch" in answer
