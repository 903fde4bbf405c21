"""POST /gate-gpu-quota in process, bytes in and bytes out: a GPU pod of a quota namespace gets
the scheduling gate and the held label, whatever it already has; nothing else is touched."""

from __future__ import annotations

import base64
import json
from typing import Any

import jsonpatch

from hami_dra_webhook.admission.handler import Admission, QuotaGateRoute
from hami_dra_webhook.core.quota.gpu_quota import GATE, HELD_LABEL
from tests.admission.test_handlers import Recorded
from tests.support.loop import run
from tests.support.reviews import replica_pod, review


def _gate(document: dict[str, Any]) -> tuple[int, dict[str, Any], list[str]]:
    events = Recorded()
    status, body = run(Admission(QuotaGateRoute(), events)(json.dumps(document).encode()))
    return status, json.loads(body), events.seen


def _applied(pod: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    response = answer["response"]
    assert response["allowed"] is True
    if "patch" not in response:
        return pod
    operations = json.loads(base64.b64decode(response["patch"]))
    patched: dict[str, Any] = jsonpatch.apply_patch(pod, operations)
    return patched


def test_a_pod_is_held_with_its_own_gates_and_labels_kept() -> None:
    pod = replica_pod()
    pod["spec"]["schedulingGates"] = [{"name": "example.com/other"}]
    status, answer, seen = _gate(review(pod))
    assert status == 200 and seen == ["began", "ended"]
    held = _applied(pod, answer)
    assert held["spec"]["schedulingGates"] == [{"name": "example.com/other"}, {"name": GATE}]
    assert held["metadata"]["labels"] == {**pod["metadata"]["labels"], HELD_LABEL: "held"}
    assert "held by scheduling gate hami.io/gpu-quota" in answer["response"]["warnings"][0]
    # Nothing else is touched: the patch names the two places only.
    operations = json.loads(base64.b64decode(answer["response"]["patch"]))
    assert [op["path"] for op in operations] == [
        "/spec/schedulingGates/-",
        "/metadata/labels/hami.io~1gpu-quota",
    ]


def test_a_pod_without_gates_or_labels_gets_both_lists() -> None:
    pod = replica_pod()
    pod["metadata"].pop("labels", None)
    pod["spec"].pop("schedulingGates", None)
    held = _applied(pod, _gate(review(pod))[1])
    assert held["spec"]["schedulingGates"] == [{"name": GATE}]
    assert held["metadata"]["labels"] == {HELD_LABEL: "held"}


def test_a_pod_already_held_an_update_and_another_kind_are_left_alone() -> None:
    pod = replica_pod()
    pod["spec"]["schedulingGates"] = [{"name": GATE}]
    assert "patch" not in _gate(review(pod))[1]["response"]
    assert (
        "patch"
        not in _gate(review(replica_pod(), operation="UPDATE", old=replica_pod()))[1]["response"]
    )
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {}}
    answer = _gate(review(job, kind="Job", group="batch", resource="jobs"))[1]
    assert "patch" not in answer["response"]


def test_a_body_that_is_no_review_is_answered_400() -> None:
    events = Recorded()
    status, _ = run(Admission(QuotaGateRoute(), events)(b"{}"))
    assert status == 400 and events.seen == ["malformed"]
