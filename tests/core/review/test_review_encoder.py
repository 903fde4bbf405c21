"""The one encoder from a decision to the AdmissionReview answer."""

from __future__ import annotations

import base64
import json

import pytest

from hami_dra_webhook.core.model import patch
from hami_dra_webhook.core.outcome.decision import Converted, Refusal, Unchanged
from hami_dra_webhook.core.review.wire import MalformedReview, encode, parse_review

OPS = [patch.remove("/spec/containers/0/resources/limits")]


def converted(ops: list[patch.PatchOp], warnings: list[str] | None = None) -> Converted:
    return Converted(patch=ops, templates=[], plan=(), warnings=warnings or [], resources=[])


def test_converted_allows_with_its_patch() -> None:
    answer = encode("u1", converted(OPS))
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert set(response) == {"uid", "allowed", "patch", "patchType"}
    assert response["uid"] == "u1" and response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(response["patch"])) == OPS


def test_an_empty_patch_is_sent_as_none_at_all() -> None:
    assert encode("u", converted([]))["response"] == {"uid": "u", "allowed": True}


def test_unchanged_allows_as_it_is() -> None:
    assert encode("u", Unchanged(warnings=[]))["response"] == {"uid": "u", "allowed": True}


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (400, "BadRequest"),
        (403, "Forbidden"),
        (409, "Conflict"),
        (422, "Invalid"),
        (418, "Forbidden"),
        (500, "InternalError"),
        (503, "ServiceUnavailable"),
        (504, "Timeout"),
        (599, "InternalError"),
    ],
)
def test_a_refusal_denies_with_its_code_and_a_status_reason(code: int, reason: str) -> None:
    response = encode("u", Refusal(code=code, message="why", warnings=[], reason="r"))["response"]
    assert response == {
        "uid": "u",
        "allowed": False,
        "status": {"code": code, "message": "why", "reason": reason},
    }


def test_warnings_follow_the_decisions_own_and_are_cut_once() -> None:
    long = "w" * 300
    decision = converted(OPS, warnings=["first", long])
    response = encode("u", decision, warnings=["from the cluster"])["response"]
    assert response["warnings"] == ["first", "w" * 117 + "...", "from the cluster"]
    assert decision.warnings == ["first", long], "the decision itself is not changed"
    refused = encode("u", Refusal(422, "m", ["a"], "r"), warnings=["b"])["response"]
    assert refused["warnings"] == ["a", "b"]


def test_audit_annotations_are_passed_on() -> None:
    audit = {"outcome": "converted", "templates": "t1"}
    assert encode("u", converted(OPS), audit=audit)["response"]["auditAnnotations"] == audit
    assert "auditAnnotations" not in encode("u", converted(OPS), audit={})["response"]


def request_document(**request: object) -> dict[str, object]:
    base: dict[str, object] = {
        "uid": "u1",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "operation": "CREATE",
        "object": {"spec": {}},
    }
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": base | request,
    }


def test_parse_review_reads_the_request() -> None:
    document = request_document(
        namespace="ml",
        name="p",
        dryRun=True,
        userInfo={"username": "system:serviceaccount:kube-system:replicaset-controller"},
        oldObject={"spec": {"x": 1}},
    )
    request = parse_review(json.dumps(document).encode()).request
    assert (request.uid, request.operation, request.namespace, request.name) == (
        "u1",
        "CREATE",
        "ml",
        "p",
    )
    assert request.dry_run is True and request.object == {"spec": {}}
    assert request.old_object == {"spec": {"x": 1}}
    assert request.user == "system:serviceaccount:kube-system:replicaset-controller"
    assert request.resource_name == "v1/pods" and request.is_pod
    plain = parse_review(json.dumps(request_document()).encode()).request
    assert plain.dry_run is False and plain.user == "" and plain.namespace is None


@pytest.mark.parametrize(
    ("change", "is_pod", "resource"),
    [
        ({}, True, "v1/pods"),
        ({"subResource": "ephemeralcontainers"}, False, "v1/pods/ephemeralcontainers"),
        ({"kind": {"group": "apps", "version": "v1", "kind": "Pod"}}, False, "v1/pods"),
        ({"kind": {"group": "", "version": "v1", "kind": "Node"}}, False, "v1/pods"),
        ({"resource": None}, True, ""),
        (
            {"resource": {"group": "apps", "version": "v1", "resource": "deployments"}},
            True,
            "apps/v1/deployments",
        ),
        ({"userInfo": {"username": 7}}, True, "v1/pods"),
    ],
)
def test_what_a_request_is(change: dict[str, object], is_pod: bool, resource: str) -> None:
    request = parse_review(json.dumps(request_document(**change)).encode()).request
    assert request.is_pod is is_pod and request.resource_name == resource
    assert request.user == ""


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "the body is not JSON: "),
        (b"[" * 5000 + b"]" * 5000, "the body is nested too deeply to be a Kubernetes object"),
        (b"[]", "not an admission.k8s.io/v1 AdmissionReview: the body: "),
        (
            json.dumps(
                {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}
            ).encode(),
            "not an admission.k8s.io/v1 AdmissionReview: apiVersion: Input should be 'admission.k8s.io/v1' (2 problem(s))",
        ),
        (
            json.dumps(request_document(uid="")).encode(),
            "not an admission.k8s.io/v1 AdmissionReview: request.uid: String should have at least 1 character (1 problem(s))",
        ),
    ],
)
def test_malformed_reviews_are_named(body: bytes, message: str) -> None:
    with pytest.raises(MalformedReview) as raised:
        parse_review(body)
    assert str(raised.value).startswith(message), str(raised.value)
