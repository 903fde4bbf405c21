"""No pod shape makes the admission use case fail: whatever JSON sits where a pod or its old
version belongs, CREATE and UPDATE answer (a conversion, no change, or a 4xx refusal with a
message), never an unexpected error that the server would turn into a 500."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hami_dra_webhook.admission.admitted import AdmissionRules
from hami_dra_webhook.admission.mutator import PodMutator
from hami_dra_webhook.cluster.templates.store import OfflineTemplateStore
from hami_dra_webhook.core.review.wire import parse_review
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY, policy_from_mapping
from tests.support.strategies import RICH_POD, odd_pods, pods_with_odd_fields

SIZES = {"deviceMemorySizes": ["24Gi", "80Gi"]}
POLICIES = [
    policy_from_mapping({"hamiDraWebhook": SIZES}).policy,
    policy_from_mapping(
        {"nvidia": {"overwriteEnv": True, "libCudaLogLevel": 1}, "hamiDraWebhook": SIZES}
    ).policy,
    policy_from_mapping(
        {"nvidia": {"defaultMemory": 2000, "gpuCorePolicy": "force"}, "hamiDraWebhook": SIZES}
    ).policy,
]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(new=odd_pods(), old=odd_pods(), operation=st.sampled_from(["CREATE", "UPDATE"]))
def test_any_shape_is_answered(new: Any, old: Any, operation: str) -> None:
    request = {
        "uid": "u",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": operation,
        "object": new if isinstance(new, dict) else None,
        "oldObject": old if isinstance(old, dict) else None,
    }
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    parsed = parse_review(json.dumps(review).encode()).request
    record = asyncio.run(
        PodMutator(AdmissionRules(DEFAULT_POLICY), OfflineTemplateStore()).mutate(parsed)
    )
    response = record.answer["response"]
    assert record.outcome in ("converted", "unchanged", "refused")
    if not response["allowed"]:
        assert 400 <= response["status"]["code"] < 500 and response["status"]["message"]


def _answer(policy: Any, operation: str, new: Any, old: Any) -> Any:
    request = {
        "uid": "u",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": operation,
        "namespace": "team-a",
        "object": new,
        "oldObject": old,
    }
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    parsed = parse_review(json.dumps(review).encode()).request
    return asyncio.run(PodMutator(AdmissionRules(policy), OfflineTemplateStore()).mutate(parsed))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    odd=pods_with_odd_fields(),
    policy=st.sampled_from(POLICIES),
    operation=st.sampled_from(["CREATE", "UPDATE"]),
)
def test_a_gpu_pod_with_any_field_of_any_shape_is_answered(
    odd: tuple[dict[str, Any], list[tuple[Any, ...]]], policy: Any, operation: str
) -> None:
    """Every field the translation reads, at any depth, replaced by any JSON value (the class
    of finding 5 of the second hostile-callers issue: `env[].name` a map gave a 500): CREATE
    and UPDATE are answered with a conversion whose patch applies, no change, or a 4xx
    refusal with a message."""
    import jsonpatch

    pod, _ = odd
    old = RICH_POD if operation == "UPDATE" else None
    record = _answer(policy, operation, pod, old)
    response = record.answer["response"]
    assert record.outcome in ("converted", "unchanged", "refused")
    if not response["allowed"]:
        assert 400 <= response["status"]["code"] < 500 and response["status"]["message"]
    elif "patch" in response:
        operations = json.loads(base64.b64decode(response["patch"]))
        jsonpatch.apply_patch(pod, operations)


@pytest.mark.parametrize("name", [{"a": 1}, ["x"], 5, None])
def test_an_env_name_that_is_no_string_is_a_400_naming_it(name: Any) -> None:
    """Finding 5: a CREATE whose GPU container has an env entry named by a map or a list was a
    500 with a traceback; every such name is refused with its path."""
    pod = {
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "env": [{"name": "OK", "value": "1"}, {"name": name, "value": "v"}],
                    "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/priority": "1"}},
                }
            ]
        }
    }
    response = _answer(POLICIES[0], "CREATE", pod, None).answer["response"]
    assert response["allowed"] is False and response["status"]["code"] == 400
    assert response["status"]["message"] == 'container "c": env[1].name is not a string'


def test_an_update_with_containers_of_the_wrong_type_is_answered() -> None:
    """Found by the test above: `containers: 1` in the old pod made the UPDATE path raise."""
    request = {
        "uid": "u",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "UPDATE",
        "object": {"spec": {"containers": [{"name": ["x"], "resources": {}}]}},
        "oldObject": {"spec": {"containers": 1, "initContainers": [{"name": {"a": 1}}]}},
    }
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    parsed = parse_review(json.dumps(review).encode()).request
    record = asyncio.run(
        PodMutator(AdmissionRules(DEFAULT_POLICY), OfflineTemplateStore()).mutate(parsed)
    )
    assert record.answer["response"] == {"uid": "u", "allowed": True}


@pytest.mark.parametrize(
    "namespace",
    ["../kube-system", "kube-system/resourceclaimtemplates", "Team-A", "-a", "a" * 64, "a b"],
)
def test_a_namespace_that_is_no_name_is_refused_before_any_use(namespace: str) -> None:
    """It would go into the API path the templates are written to (finding 11 of the
    hostile-callers issue): refused, and nothing is written (the store is not called)."""
    calls: list[str] = []

    class Recording(OfflineTemplateStore):
        async def ensure(self, namespace: str, *args: Any, **kwargs: Any) -> list[str]:
            calls.append(namespace)
            return []

    pod = {
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
    }
    request = {
        "uid": "u",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "CREATE",
        "namespace": namespace,
        "object": pod,
    }
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    parsed = parse_review(json.dumps(review).encode()).request
    record = asyncio.run(PodMutator(AdmissionRules(DEFAULT_POLICY), Recording()).mutate(parsed))
    response = record.answer["response"]
    assert response["allowed"] is False and response["status"]["code"] == 400
    assert "is not a Kubernetes namespace name" in response["status"]["message"]
    assert calls == []
    fine = {**request, "namespace": "team-a-1"}
    parsed = parse_review(json.dumps({**review, "request": fine}).encode()).request
    assert (
        asyncio.run(PodMutator(AdmissionRules(DEFAULT_POLICY), Recording()).mutate(parsed)).outcome
        == "converted"
    )
    assert calls == ["team-a-1"]
