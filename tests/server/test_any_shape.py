"""No pod shape makes the admission use case fail: whatever JSON sits where a pod or its old
version belongs, CREATE and UPDATE answer (a conversion, no change, or a 4xx refusal with a
message), never an unexpected error that the server would turn into a 500."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hami_dra_webhook.admission.mutator import PodMutator
from hami_dra_webhook.cluster.template_store import OfflineTemplateStore
from hami_dra_webhook.core.policy import DEFAULT_POLICY
from hami_dra_webhook.core.review import parse_review
from tests.support.strategies import odd_pods


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
    record = asyncio.run(PodMutator(DEFAULT_POLICY, OfflineTemplateStore()).mutate(parsed))
    response = record.answer["response"]
    assert record.outcome in ("converted", "unchanged", "refused")
    if not response["allowed"]:
        assert 400 <= response["status"]["code"] < 500 and response["status"]["message"]


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
    record = asyncio.run(PodMutator(DEFAULT_POLICY, OfflineTemplateStore()).mutate(parsed))
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
    record = asyncio.run(PodMutator(DEFAULT_POLICY, Recording()).mutate(parsed))
    response = record.answer["response"]
    assert response["allowed"] is False and response["status"]["code"] == 400
    assert "is not a Kubernetes namespace name" in response["status"]["message"]
    assert calls == []
    fine = {**request, "namespace": "team-a-1"}
    parsed = parse_review(json.dumps({**review, "request": fine}).encode()).request
    assert (
        asyncio.run(PodMutator(DEFAULT_POLICY, Recording()).mutate(parsed)).outcome == "converted"
    )
    assert calls == ["team-a-1"]
