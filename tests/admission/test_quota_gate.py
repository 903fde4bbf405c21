"""POST /gate-gpu-quota in process, bytes in and bytes out: a GPU pod of a quota namespace gets
the scheduling gate and the held label, whatever it already has; nothing else is touched.
Whether its namespace holds its pods is the replica's QuotaView's answer (issue 62): here over a
stand-in for the API's ResourceQuota reads (what it reads of them is all a test needs; the real
watch and reads are tests/e2e/test_gpu_quotas.py's)."""

from __future__ import annotations

import base64
import json
from typing import Any

import jsonpatch

from hami_dra_webhook.admission.handler import Admission, QuotaGateRoute
from hami_dra_webhook.admission.quota_gate import DECIDED, with_quota_gate
from hami_dra_webhook.cluster.quota.view import QuotaView
from hami_dra_webhook.core.outcome.decision import Converted
from hami_dra_webhook.core.quota.gpu_quota import GATE, HELD_LABEL, quota_keys
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from hami_dra_webhook.core.translate.pod import translate_pod
from hami_dra_webhook.kube.port import ApiError
from tests.admission.test_handlers import Recorded
from tests.support.loop import run
from tests.support.reviews import replica_pod, review


class Quotas:
    """The ResourceQuotas kube-apiserver would answer, by namespace (a stand-in: no cluster);
    `broken`: every read fails."""

    def __init__(self, by_namespace: dict[str, list[Any]], broken: bool = False) -> None:
        self.by_namespace, self.broken, self.reads = by_namespace, broken, 0

    async def list_path(self, path: str, query: Any, *, timeout: float) -> list[Any]:
        self.reads += 1
        if self.broken:
            raise ApiError(503, "ServiceUnavailable", "down")
        return self.by_namespace.get(path.split("/")[4], [])


GPU_QUOTA = {"metadata": {"name": "gpu"}, "spec": {"hard": {"limits.nvidia.com/gpumem": "8000"}}}


def _view(api: Quotas) -> QuotaView:
    return QuotaView(api, quota_keys(DEFAULT_POLICY))  # type: ignore[arg-type]


class _Mutator:
    def __init__(self, quotas: QuotaView | None) -> None:
        self.quotas = quotas


def _gate(
    document: dict[str, Any], quotas: QuotaView | None = None
) -> tuple[int, dict[str, Any], list[str]]:
    events = Recorded()
    route = QuotaGateRoute(_Mutator(quotas))  # type: ignore[arg-type]
    status, body = run(Admission(route, events)(json.dumps(document).encode()))
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
    pod["metadata"]["labels"][HELD_LABEL] = "held"
    assert "patch" not in _gate(review(pod))[1]["response"]
    # Created with the gate but not the label (the quota work's hint): the label is added.
    del pod["metadata"]["labels"][HELD_LABEL]
    assert _applied(pod, _gate(review(pod))[1])["metadata"]["labels"][HELD_LABEL] == "held"
    assert (
        "patch"
        not in _gate(review(replica_pod(), operation="UPDATE", old=replica_pod()))[1]["response"]
    )
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {}}
    answer = _gate(review(job, kind="Job", group="batch", resource="jobs"))[1]
    assert "patch" not in answer["response"]


def test_a_body_that_is_no_review_is_answered_400() -> None:
    events = Recorded()
    status, _ = run(Admission(QuotaGateRoute(_Mutator(None)), events)(b"{}"))  # type: ignore[arg-type]
    assert status == 400 and events.seen == ["malformed"]


def test_the_view_decides_and_reads_the_namespace_until_it_has_listed() -> None:
    """Issue 62: held where the view knows a kept quota, free where it knows none, once it has
    listed the quotas (no read); until then each namespace's quotas are read, and a pod is held
    when that read fails."""
    api = Quotas({"fresh": [GPU_QUOTA]})
    view = _view(api)
    view._listed([{**GPU_QUOTA, "metadata": {"name": "gpu", "namespace": "watched"}}])
    pod = replica_pod()
    for namespace, held, reads in (("watched", True, 0), ("fresh", True, 1), ("none", False, 2)):
        answer = _gate(review(pod, namespace=namespace), view)[1]
        assert ("patch" in answer["response"]) is held, namespace
        assert api.reads == reads, namespace
    view.watched.synced = True  # listed, and watching
    for namespace, held in (("watched", True), ("fresh", False), ("none", False)):
        answer = _gate(review(pod, namespace=namespace), view)[1]
        assert ("patch" in answer["response"]) is held, namespace
    assert api.reads == 2
    broken = _view(Quotas({}, broken=True))
    assert "patch" in _gate(review(pod, namespace="none"), broken)[1]["response"]


def test_the_pod_webhook_decides_its_conversions_in_the_same_answer() -> None:
    """A converted pod gets the gate (and label) in the pod webhook's own answer where its
    namespace holds its pods, and the mark either way, so the gate webhook is not called."""
    pod = replica_pod()
    decision = translate_pod(pod, DEFAULT_POLICY, "team")
    assert isinstance(decision, Converted)
    view = _view(Quotas({"team": [GPU_QUOTA]}))
    held = run(with_quota_gate(decision, None, "team", view))
    assert isinstance(held, Converted)
    converted = held.apply(pod)
    assert converted["spec"]["schedulingGates"] == [{"name": GATE}]
    assert converted["metadata"]["labels"][HELD_LABEL] == "held"
    assert converted["metadata"]["annotations"][DECIDED] == "held"
    free = run(with_quota_gate(decision, None, "other", view))
    assert isinstance(free, Converted)
    converted = free.apply(pod)
    assert "schedulingGates" not in converted["spec"]
    assert converted["metadata"]["annotations"][DECIDED] == "free"
    assert run(with_quota_gate(decision, None, "team", None)) is decision  # no quotas kept
