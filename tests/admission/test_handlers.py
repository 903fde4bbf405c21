"""The admission handlers in process: an AdmissionReview's bytes in, the status and the answer's
bytes out, with what they report to the server (its metrics and admission log). The process-level
tests (tests/server) send the same bytes over TLS to a real webhook process."""

from __future__ import annotations

import base64
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jsonpatch

from hami_dra_webhook.admission.admitted import AdmissionRules
from hami_dra_webhook.admission.handler import (
    OFF_LOOP_BYTES,
    Admission,
    AdmissionEvents,
    PodRoute,
    VolcanoJobRoute,
    WorkloadRoute,
)
from hami_dra_webhook.admission.mutator import MutationRecord, PodMutator
from hami_dra_webhook.cluster.state import ClusterState
from hami_dra_webhook.cluster.templates.store import OfflineTemplateStore
from hami_dra_webhook.core.migration.pools import Scope
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from hami_dra_webhook.server.admission_events import preview_line
from tests.support.loop import run
from tests.support.reviews import replica_pod, review


class Recorded:
    """The events a handler reported, in order."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.results: list[MutationRecord] = []
        self.lines: list[dict[str, Any]] = []

    def malformed(self) -> None:
        self.seen.append("malformed")

    def began(self) -> None:
        self.seen.append("began")

    def ended(self) -> None:
        self.seen.append("ended")

    def answered(self, result: MutationRecord, seconds: float) -> None:
        assert 0 <= seconds < 60
        self.seen.append(f"answered {result.outcome}")
        self.results.append(result)

    def previewed(self, outcome: str, request: Any, seconds: float) -> None:
        self.seen.append(f"previewed {outcome}")
        self.lines.append(preview_line(outcome, request, seconds))


def _bytes(document: dict[str, Any]) -> bytes:
    return json.dumps(document).encode()


def _mutator(
    volcano_schedulers: frozenset[str] = frozenset(), scope: Scope | None = None, **options: Any
) -> PodMutator:
    rules = AdmissionRules(
        DEFAULT_POLICY, volcano_schedulers=volcano_schedulers, scope=scope or Scope()
    )
    return PodMutator(rules, OfflineTemplateStore(), **options)


def PodAdmission(  # noqa: N802 - named as the route it builds
    mutator: PodMutator, events: AdmissionEvents, off_loop_bytes: int = OFF_LOOP_BYTES
) -> Admission[Any]:
    return Admission(PodRoute(mutator), events, mutator.off_loop, off_loop_bytes)


def VolcanoJobAdmission(mutator: PodMutator, events: AdmissionEvents) -> Admission[Any]:  # noqa: N802
    return Admission(VolcanoJobRoute(mutator), events, mutator.off_loop)


def WorkloadAdmission(mutator: PodMutator, events: AdmissionEvents) -> Admission[Any]:  # noqa: N802
    return Admission(WorkloadRoute(mutator), events, mutator.off_loop)


def test_a_gpu_pod_is_answered_with_its_patch_and_reported() -> None:
    events = Recorded()
    document = review(replica_pod())
    status, body = run(PodAdmission(_mutator(), events)(_bytes(document)))
    assert status == 200
    answer = json.loads(body)
    assert answer["response"]["uid"] == document["request"]["uid"]
    assert answer["response"]["allowed"] is True
    pod = jsonpatch.apply_patch(
        document["request"]["object"], json.loads(base64.b64decode(answer["response"]["patch"]))
    )
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "1"}
    assert pod["spec"]["resourceClaims"][0]["resourceClaimTemplateName"].startswith("hami-gpu-")
    assert events.seen == ["began", "ended", "answered converted"]


def test_the_same_answer_from_the_off_loop_thread() -> None:
    """A body over off_loop_bytes is decoded on the mutator's thread: the same bytes out."""
    document = review(replica_pod())
    on_loop = run(PodAdmission(_mutator(), Recorded())(_bytes(document)))
    with ThreadPoolExecutor(1) as thread:
        events = Recorded()
        handler = PodAdmission(_mutator(off_loop=thread), events, off_loop_bytes=0)
        off_loop = run(handler(_bytes(document)))
    assert off_loop == on_loop
    assert events.seen == ["began", "ended", "answered converted"]


def test_a_body_that_is_no_review_is_a_400_with_a_message() -> None:
    for handler_of in (
        lambda e: PodAdmission(_mutator(), e),
        lambda e: VolcanoJobAdmission(_mutator(), e),
        lambda e: WorkloadAdmission(_mutator(), e),
    ):
        events = Recorded()
        status, body = run(handler_of(events)(b'{"kind": "AdmissionReview", "request": 7}'))
        assert status == 400
        assert set(json.loads(body)) == {"message"}
        assert events.seen == ["malformed"]


def test_a_failing_use_case_is_an_internal_error_not_an_exception() -> None:
    class Broken:
        async def ensure(self, *_: Any, **__: Any) -> list[str]:
            raise RuntimeError("a bug")

    events = Recorded()
    document = review(replica_pod())
    mutator = PodMutator(AdmissionRules(DEFAULT_POLICY), Broken())
    status, body = run(PodAdmission(mutator, events)(_bytes(document)))
    answer = json.loads(body)["response"]
    assert status == 200 and answer["allowed"] is False
    assert answer["status"]["code"] == 500
    assert events.seen == ["began", "ended", "answered error"]


def test_a_volcano_job_left_when_jobs_are_not_converted() -> None:
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "team-a"},
        "spec": {"tasks": [{"name": "w", "template": replica_pod()}]},
    }
    document = review(job, kind="Job", group="batch.volcano.sh", resource="jobs")
    events = Recorded()
    status, body = run(VolcanoJobAdmission(_mutator(), events)(_bytes(document)))
    answer = json.loads(body)["response"]
    assert status == 200 and answer["allowed"] is True and "patch" not in answer
    assert events.seen[:2] == ["began", "ended"] and len(events.results) == 1


def _volcano_job(*templates: dict[str, Any]) -> bytes:
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "team-a"},
        "spec": {"tasks": [{"name": f"t{i}", "template": t} for i, t in enumerate(templates)]},
    }
    return _bytes(review(job, kind="Job", group="batch.volcano.sh", resource="jobs"))


def _labelled(**labels: str) -> dict[str, Any]:
    pod = replica_pod()
    pod["metadata"]["labels"] = dict(labels)
    return pod


def _answer_job(mutator: PodMutator, *templates: dict[str, Any]) -> dict[str, Any]:
    status, body = run(VolcanoJobAdmission(mutator, Recorded())(_volcano_job(*templates)))
    assert status == 200
    answer: dict[str, Any] = json.loads(body)["response"]
    return answer


def _patched_tasks(answer: dict[str, Any]) -> set[str]:
    ops = json.loads(base64.b64decode(answer.get("patch", "") or "W10="))
    return {op["path"].split("/")[3] for op in ops}


def test_a_volcano_job_is_refused_as_a_pod_is_when_capacity_is_dropped() -> None:
    """Issue 46, finding 2: the Volcano path went straight to the template store, skipping the
    refusal a shared-GPU pod gets where kube-apiserver drops consumable capacity."""
    dropped = ClusterState(capacity="dropped", api_answered=True)
    volcano = frozenset({"volcano"})
    answer = _answer_job(_mutator(cluster=dropped, volcano_schedulers=volcano), replica_pod())
    assert answer["allowed"] is False and answer["status"]["code"] == 422, answer
    assert "drops DRA consumable capacity" in answer["status"]["message"]
    pod_answer = json.loads(
        run(PodAdmission(_mutator(cluster=dropped), Recorded())(_bytes(review(replica_pod()))))[1]
    )["response"]
    assert pod_answer["status"] == answer["status"]
    kept = ClusterState(capacity="effective", api_answered=True)
    answer = _answer_job(_mutator(cluster=kept, volcano_schedulers=volcano), replica_pod())
    assert answer["allowed"] is True and answer["patch"]


def test_a_volcano_jobs_tasks_follow_the_migration_scope_and_opt_out() -> None:
    """Issue 46, finding 3: under scope `workloads` only task templates labelled
    hami.io/gpu-migration=dra are converted (the Job's webhook sees the Job's labels only); a
    template labelled hami.io/webhook=ignore is left under every scope, as its pods are."""
    volcano = frozenset({"volcano"})
    opted, plain = _labelled(**{"hami.io/gpu-migration": "dra"}), _labelled()
    ignored = _labelled(**{"hami.io/webhook": "ignore", "hami.io/gpu-migration": "dra"})
    workloads = _mutator(volcano_schedulers=volcano, scope=Scope("workloads"))
    assert _patched_tasks(_answer_job(workloads, opted, plain, ignored)) == {"0"}
    assert "patch" not in _answer_job(workloads, plain)
    every = _mutator(volcano_schedulers=volcano)
    assert _patched_tasks(_answer_job(every, opted, plain, ignored)) == {"0", "1"}


def test_a_workload_preview_warns_and_never_denies() -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "trainer", "namespace": "team-a"},
        "spec": {"template": {k: v for k, v in replica_pod().items() if k in ("metadata", "spec")}},
    }
    document = review(deployment, kind="Deployment", group="apps", resource="deployments")
    events = Recorded()
    handler = WorkloadAdmission(_mutator(), events)
    status, body = run(handler(_bytes(document)))
    answer = json.loads(body)["response"]
    assert status == 200 and answer["allowed"] is True
    assert any("hami-gpu-" in warning for warning in answer["warnings"]), answer["warnings"]
    assert events.seen == ["began", "ended", f"previewed {events.seen[-1].split()[-1]}"]
    assert events.seen[-1] != "previewed none"
    [line] = events.lines  # what the admission log writes: which workload, what it becomes
    assert {k: line[k] for k in ("kind", "namespace", "workload", "operation", "preview")} == {
        "kind": "Deployment",
        "namespace": "team-a",
        "workload": "trainer",
        "operation": "CREATE",
        "preview": events.seen[-1].split()[-1],
    }
    assert line["duration_ms"] >= 0
