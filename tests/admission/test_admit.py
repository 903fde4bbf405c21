"""The admission use case: operations, kinds, refusals, cluster safety, offline mode."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Iterator
from typing import Any

import jsonpatch
import pytest

from hami_dra_webhook.admission.admitted import AdmissionRules
from hami_dra_webhook.admission.mutator import MutationRecord, PodMutator
from hami_dra_webhook.cluster.state import ClusterState
from hami_dra_webhook.cluster.templates.store import ApiTemplateStore, OfflineTemplateStore
from hami_dra_webhook.core.review.wire import parse_review
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY, Policy, policy_from_mapping
from hami_dra_webhook.core.vendors.facts import facts_of
from hami_dra_webhook.kube.client import KubernetesApi
from tests.controlplane.for_pytest import start_plane
from tests.controlplane.gpu_node import Gpu, GpuNode
from tests.support.api_calls import CallsThrough
from tests.support.apiserver_standin import StandIn
from tests.support.cluster import Cluster, api_for
from tests.support.loop import run
from tests.support.reviews import replica_pod, review


def admit(mutator: PodMutator, document: dict[str, Any]) -> MutationRecord:
    return run(mutator.mutate(parse_review(json.dumps(document).encode()).request))


def patched(document: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    ops = json.loads(base64.b64decode(answer["response"]["patch"]))
    return jsonpatch.apply_patch(document["request"]["object"], ops)


@pytest.fixture
def namespace(kube: Cluster) -> str:
    return kube.create_namespace("admit")


@pytest.fixture
def api(real_api: KubernetesApi) -> CallsThrough:
    return CallsThrough(real_api)


@pytest.fixture
def mutator(api: CallsThrough) -> PodMutator:
    return PodMutator(
        rules=AdmissionRules(DEFAULT_POLICY), store=ApiTemplateStore(api), cluster=ClusterState()
    )


def stored(kube: Cluster, namespace: str) -> list[str]:
    return [
        t["metadata"]["name"] for t in kube.get("resourceclaimtemplates", "-n", namespace)["items"]
    ]


def powerless_api(kube: Cluster, namespace: str) -> KubernetesApi:
    """The adapter as a ServiceAccount with no RBAC: the real server answers 403."""
    kube.kubectl("create", "serviceaccount", "powerless", "-n", namespace)
    return api_for(kube.service_account_kubeconfig(namespace, "powerless"))


@pytest.mark.plane
def test_create_converts_creates_templates_and_echoes_uid(
    mutator: PodMutator, kube: Cluster, namespace: str
) -> None:
    document = review(replica_pod(), namespace=namespace)
    result = admit(mutator, document)
    answer = result.answer["response"]
    assert answer["uid"] == document["request"]["uid"] and answer["allowed"] is True
    assert answer["patchType"] == "JSONPatch"
    pod = patched(document, result.answer)
    assert pod["spec"]["containers"][0]["resources"] == {
        "limits": {"cpu": "1"},
        "claims": [{"name": "cuda-gpu"}],
    }
    assert stored(kube, namespace) == result.templates
    assert answer["auditAnnotations"] == {"outcome": "converted", "templates": result.templates[0]}
    assert any("1 GPU, 4000 MiB" in w for w in answer["warnings"])
    assert all(len(w) <= 120 for w in answer["warnings"])
    assert result.resources == ["nvidia.com/gpu", "nvidia.com/gpumem"]


@pytest.mark.plane
def test_dry_run_admission_creates_nothing(
    mutator: PodMutator, api: CallsThrough, kube: Cluster, namespace: str
) -> None:
    result = admit(mutator, review(replica_pod(), dry_run=True, namespace=namespace))
    assert result.answer["response"]["allowed"] is True and "patch" in result.answer["response"]
    assert api.calls == {"create_template": 1}  # a server-side dry run
    assert stored(kube, namespace) == []


@pytest.mark.plane
def test_refused_pod_has_code_and_message(
    mutator: PodMutator, api: CallsThrough, namespace: str
) -> None:
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "16Gi"}
    result = admit(mutator, review(replica_pod(limits), namespace=namespace))
    answer = result.answer["response"]
    assert answer["allowed"] is False and "patch" not in answer
    assert answer["status"]["code"] == 422 and "gpumem is in MiB" in answer["status"]["message"]
    assert api.calls == {}


@pytest.mark.plane
def test_update_strips_reapplied_legacy_keys_only(mutator: PodMutator, namespace: str) -> None:
    created = review(replica_pod(), namespace=namespace)
    converted = patched(created, admit(mutator, created).answer)
    reapplied = copy.deepcopy(converted)
    reapplied["spec"]["containers"][0]["resources"]["limits"] |= {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpumem": "4000",
    }
    reapplied["metadata"]["labels"]["release"] = "2"
    document = review(reapplied, operation="UPDATE", old=converted)
    result = admit(mutator, document)
    assert patched(document, result.answer) == converted | {"metadata": reapplied["metadata"]}
    # An update that does not bring legacy keys back is left as it is.
    plain = admit(mutator, review(converted, operation="UPDATE", old=converted)).answer["response"]
    assert plain["allowed"] is True and "patch" not in plain


@pytest.mark.plane
@pytest.mark.parametrize(
    "document",
    [
        review(replica_pod(), operation="DELETE", old=replica_pod()),
        review(replica_pod(), operation="CONNECT"),
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
    mutator: PodMutator, api: CallsThrough, document: dict[str, Any]
) -> None:
    answer = admit(mutator, document).answer["response"]
    assert answer["allowed"] is True and "patch" not in answer
    assert api.calls == {}


@pytest.fixture(scope="module")
def gate_off(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubernetesApi]:
    """A real kube-apiserver 1.34 with DRAConsumableCapacity off (its default): it drops
    capacity requests from claims."""
    plane = start_plane(
        "1.34", tmp_path_factory.mktemp("gate-off"), capacity=False, controllers=False
    )
    status, _ = plane.request("POST", "/api/v1/namespaces", {"metadata": {"name": "team-a"}})
    assert status == 201
    api = api_for(plane.admin_kubeconfig)
    yield api
    run(api.close())
    plane.stop()


def test_capacity_dropped_refuses_sharing_but_not_whole_gpus(gate_off: KubernetesApi) -> None:
    cluster = ClusterState()
    run(cluster.refresh(gate_off, DEFAULT_POLICY, "team-a", timeout=5))
    assert cluster.capacity == "dropped" and cluster.api_answered
    mutator = PodMutator(
        rules=AdmissionRules(DEFAULT_POLICY), store=ApiTemplateStore(gate_off), cluster=cluster
    )
    shared = admit(mutator, review(replica_pod())).answer["response"]
    assert shared["allowed"] is False and "DRAConsumableCapacity" in shared["status"]["message"]
    whole = admit(mutator, review(replica_pod({"nvidia.com/gpu": "2"}))).answer["response"]
    assert whole["allowed"] is True
    lenient = policy_from_mapping({"hamiDraWebhook": {"allowSharingWithoutCapacity": True}}).policy
    allowed = admit(
        PodMutator(
            rules=AdmissionRules(lenient), store=ApiTemplateStore(gate_off), cluster=cluster
        ),
        review(replica_pod()),
    ).answer["response"]
    assert allowed["allowed"] is True and any("whole GPUs" in w for w in allowed["warnings"])


@pytest.mark.plane
def test_capacity_kept_where_the_gate_is_on(real_api: KubernetesApi, namespace: str) -> None:
    cluster = ClusterState()
    run(cluster.refresh(real_api, DEFAULT_POLICY, namespace, timeout=5))
    assert cluster.capacity == "effective"


@pytest.mark.plane
def test_probe_is_a_dry_run_and_deviceclass_mapping_warns(
    kube: Cluster, real_api: KubernetesApi, namespace: str
) -> None:
    mapping = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": f"{namespace}.nvidia.com"},
        "spec": {"extendedResourceName": "nvidia.com/gpu"},
    }
    kube.apply(mapping, namespace=namespace)
    try:
        cluster = ClusterState()
        run(cluster.refresh(real_api, DEFAULT_POLICY, namespace, timeout=5))
        assert stored(kube, namespace) == []  # the capacity probe is a dry run
        assert cluster.extended_resources == {"nvidia.com/gpu": f"{namespace}.nvidia.com"}
        mutator = PodMutator(
            rules=AdmissionRules(DEFAULT_POLICY), store=ApiTemplateStore(real_api), cluster=cluster
        )
        answer = admit(mutator, review(replica_pod(), namespace=namespace)).answer["response"]
    finally:
        kube.kubectl("delete", "deviceclass", f"{namespace}.nvidia.com")
    assert any(
        f"DeviceClass {namespace}.nvidia.com also claims nvidia.com/gpu" in w
        for w in answer["warnings"]
    )


@pytest.mark.plane
def test_api_forbidden_refuses_the_pod(kube: Cluster, namespace: str) -> None:
    api = powerless_api(kube, namespace)
    try:
        mutator = PodMutator(rules=AdmissionRules(DEFAULT_POLICY), store=ApiTemplateStore(api))
        answer = admit(mutator, review(replica_pod(), namespace=namespace)).answer["response"]
    finally:
        run(api.close())
    assert answer["allowed"] is False and answer["status"]["code"] == 500
    assert "RBAC" in answer["status"]["message"]


def test_budget_holds_when_the_api_hangs(standin: StandIn, standin_api: KubernetesApi) -> None:
    import time

    standin.delay[("POST", "templates")] = 5
    mutator = PodMutator(
        rules=AdmissionRules(DEFAULT_POLICY), store=ApiTemplateStore(standin_api), budget=0.5
    )
    started = time.monotonic()
    answer = admit(mutator, review(replica_pod())).answer["response"]
    assert time.monotonic() - started < 1.5
    assert answer["allowed"] is False and answer["status"]["code"] in (503, 504)


def test_offline_store_answers_with_a_patch_and_says_so() -> None:
    policy: Policy = DEFAULT_POLICY
    result = admit(
        PodMutator(rules=AdmissionRules(policy), store=OfflineTemplateStore()),
        review(replica_pod()),
    )
    answer = result.answer["response"]
    assert answer["allowed"] is True and "patch" in answer
    assert any(
        w.startswith("offline webhook: ResourceClaimTemplate hami-gpu-") for w in answer["warnings"]
    )


@pytest.mark.plane
def test_failed_cluster_checks_are_kept_for_the_metrics(kube: Cluster, namespace: str) -> None:
    api = powerless_api(kube, namespace)
    try:
        cluster = ClusterState()
        run(cluster.refresh(api, DEFAULT_POLICY, namespace, timeout=5))
    finally:
        run(api.close())
    assert cluster.capacity == "unknown" and cluster.api_answered  # /version is everyone's
    assert cluster.failed_checks == [403] and "403" in cluster.last_error


def resource_slice(
    node: str, driver: str, sizes: list[str], kind: str = "hami-gpu"
) -> dict[str, Any]:
    """A ResourceSlice as the HAMi DRA driver publishes it, with these memory sizes."""
    gpus = tuple(
        Gpu(i, f"GPU-{node}-{i}", "NVIDIA A100-SXM4-80GB", 80, "Ampere", "8.0.0", memory=size)
        for i, size in enumerate(sizes)
    )
    document = GpuNode(node, gpus).resource_slice()
    document["metadata"]["name"] = f"{node}-{driver}"
    document["spec"]["driver"] = driver
    for device in document["spec"]["devices"]:
        device["attributes"]["type"] = {"string": kind}
    return document


@pytest.mark.plane
def test_memory_sizes_come_from_resource_slices(
    kube: Cluster, real_api: KubernetesApi, namespace: str
) -> None:
    driver = "hami-core-gpu.project-hami.io"
    extra = [
        resource_slice(f"{namespace}-a", driver, ["85899345920", "85899345920"]),  # 80Gi, as NVML
        resource_slice(f"{namespace}-b", driver, ["40Gi"]),
        resource_slice(f"{namespace}-c", "gpu.nvidia.com", ["32Gi"]),  # another driver: not ours
        resource_slice(f"{namespace}-d", driver, ["16Gi"], kind="mig"),  # not a hami-gpu device
    ]
    for item in extra:
        kube.apply(item, namespace=namespace)
    try:
        cluster = ClusterState()
        run(cluster.refresh(real_api, DEFAULT_POLICY, namespace, timeout=5))
        mutator = PodMutator(
            rules=AdmissionRules(DEFAULT_POLICY), store=ApiTemplateStore(real_api), cluster=cluster
        )
        limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "50"}
        answer = admit(mutator, review(replica_pod(limits), namespace=namespace)).answer["response"]
    finally:
        for item in extra:
            kube.kubectl("delete", "resourceslice", item["metadata"]["name"])
    # The GPU node's own cards (24Gi, 80Gi) and the extra hami-gpu slices (80Gi, 40Gi).
    assert facts_of(cluster.facts, "nvidia") == (80 << 30, 40 << 30, 24 << 30)
    # What hami_dra_driver_gpus and _nodes say: the node's 3 cards and the extra slices' 3
    # hami-gpu devices (not another driver's, not a mig device), on their 3 nodes.
    assert (cluster.published_gpus, cluster.publishing_nodes) == (6, 3)
    assert answer["allowed"] is True, answer
    [template] = kube.get("resourceclaimtemplates", "-n", namespace)["items"]
    alternatives = template["spec"]["spec"]["devices"]["requests"][0]["firstAvailable"]
    memory = [a["capacity"]["requests"]["memory"] for a in alternatives]
    assert memory == ["40Gi", "20Gi", "12Gi"]  # the server stores quantities canonically
    # Without a cluster's sizes (and none configured), the same pod is refused with how to fix it.
    offline = admit(
        PodMutator(rules=AdmissionRules(DEFAULT_POLICY), store=OfflineTemplateStore()),
        review(replica_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "50"})),
    )
    assert (
        offline.answer["response"]["allowed"] is False
        and "deviceMemorySizes" in offline.answer["response"]["status"]["message"]
    )


def test_odd_metadata_without_request_namespace_is_no_crash() -> None:
    for metadata in ([1, 2], "x", {"namespace": 5}):
        document = review(replica_pod(), namespace="")
        document["request"]["object"]["metadata"] = metadata
        answer = admit(
            PodMutator(rules=AdmissionRules(DEFAULT_POLICY), store=OfflineTemplateStore()), document
        ).answer["response"]
        assert answer["uid"] == document["request"]["uid"]
        assert answer["allowed"] is False or "patch" in answer


@pytest.mark.plane
def test_the_cluster_counts_as_answered_only_after_its_first_whole_check(
    real_api: KubernetesApi, namespace: str
) -> None:
    """Issue 34, finding 5: /readyz waits for `api_answered`, which was set as soon as
    /version answered, so admissions could come before the DeviceClasses that claim legacy
    resources were read (an opted-out legacy pod then got no warning for up to the check's
    interval). Now it turns true only once the first check has read them."""
    cluster = ClusterState()
    api = CallsThrough(real_api)
    seen: list[bool] = []
    api.before["list_device_classes"] = lambda: seen.append(cluster.api_answered)
    api.after["list_device_classes"] = lambda: seen.append(cluster.api_answered)
    run(cluster.refresh(api, DEFAULT_POLICY, namespace, timeout=5))
    assert seen == [False, False] and cluster.api_answered
