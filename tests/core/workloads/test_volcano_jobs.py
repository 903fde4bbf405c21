"""core/workloads/volcano_jobs.py: a Volcano Job's task templates decided as their pods would be, when
Volcano Jobs are converted at their admission."""

from __future__ import annotations

from typing import Any

from hami_dra_webhook.core.outcome.decision import Converted, Refusal, Unchanged
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from hami_dra_webhook.core.translate.pod import translate_pod
from hami_dra_webhook.core.workloads.volcano_jobs import is_volcano_job, job_decision

VOLCANO = frozenset({"volcano"})


def task(name: str, limits: dict[str, Any], scheduler: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "i", "resources": {"limits": limits}}]
    }
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    return {"name": name, "replicas": 1, "template": {"spec": spec}}


def job(*tasks: dict[str, Any], scheduler: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"tasks": list(tasks)}
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": spec,
    }


def decide(document: dict[str, Any]) -> Any:
    return job_decision(
        document, lambda t: translate_pod(t, DEFAULT_POLICY, "ns"), VOLCANO, "hami-scheduler"
    )


def test_tasks_of_volcano_and_kube_scheduler_are_converted_others_left() -> None:
    gpu = {"nvidia.com/gpu": 1}
    decision = decide(
        job(
            task("inherits", gpu),
            task("names-volcano", gpu, "volcano"),
            task("hami", gpu, "hami-scheduler"),
            task("kube", gpu, "default-scheduler"),
            task("other", gpu, "kai-scheduler"),
        )
    )
    assert isinstance(decision, Converted)
    touched = {op["path"].split("/")[3] for op in decision.patch}
    assert touched == {"0", "1", "2", "3"}  # tasks[4] (kai-scheduler) left
    removed = [op["path"] for op in decision.patch if op["path"].endswith("schedulerName")]
    assert removed == ["/spec/tasks/2/template/spec/schedulerName"]  # HAMi's only
    assert len(decision.templates) == 1  # one content, one template


def test_a_job_of_another_scheduler_is_left() -> None:
    assert isinstance(decide(job(task("t", {"nvidia.com/gpu": 1}), scheduler="kai")), Unchanged)


def test_a_refused_task_refuses_the_job_naming_it() -> None:
    decision = decide(
        job(
            task("ok", {"nvidia.com/gpu": 1}),
            task("bad", {"nvidia.com/gpumem": "1Gi", "nvidia.com/gpu": 1}),
        )
    )
    assert isinstance(decision, Refusal) and decision.message.startswith("task 'bad': ")


def test_only_volcanos_jobs() -> None:
    assert is_volcano_job(job())
    assert not is_volcano_job({**job(), "apiVersion": "batch/v1"})
    assert isinstance(decide({**job(), "spec": {"tasks": "x"}}), Unchanged)
