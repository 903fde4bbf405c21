"""The one encoder from a decision to the AdmissionReview answer."""

from __future__ import annotations

import base64
import json

import pytest

from hami_dra_webhook.core import patch
from hami_dra_webhook.core.decision import Converted, Refusal, Unchanged
from hami_dra_webhook.core.review import encode

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
    response = encode("u", Refusal(code=code, message="why", warnings=[]))["response"]
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
    refused = encode("u", Refusal(422, "m", ["a"]), warnings=["b"])["response"]
    assert refused["warnings"] == ["a", "b"]


def test_audit_annotations_are_passed_on() -> None:
    audit = {"outcome": "converted", "templates": "t1"}
    assert encode("u", converted(OPS), audit=audit)["response"]["auditAnnotations"] == audit
    assert "auditAnnotations" not in encode("u", converted(OPS), audit={})["response"]
