"""Pod templates inside objects that are not built-in workloads, at the paths custom resources
keep them (written here in the shapes those projects document; the real-world corpus's
LeaderWorkerSet and RayCluster are in test_realworld.py)."""

from __future__ import annotations

from typing import Any

from hami_dra_webhook.files.embedded import embedded_pods
from hami_dra_webhook.files.manifests import pod_template

CONTAINERS = {"containers": [{"name": "c", "image": "i"}]}


def template() -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "x"}}, "spec": dict(CONTAINERS)}


def test_the_usual_paths_are_found() -> None:
    volcano = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "spec": {
            "tasks": [{"name": "a", "template": template()}, {"name": "b", "template": template()}]
        },
    }
    kubeflow = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"template": template()},
                "Worker": {"template": template()},
            }
        },
    }
    bare = {"apiVersion": "example.com/v1", "kind": "Runner", "spec": {"runner": dict(CONTAINERS)}}
    assert [e.where for e in embedded_pods(volcano)] == [
        "spec.tasks[0].template",
        "spec.tasks[1].template",
    ]
    assert [e.where for e in embedded_pods(kubeflow)] == [
        "spec.pytorchReplicaSpecs.Master.template",
        "spec.pytorchReplicaSpecs.Worker.template",
    ]
    (found,) = embedded_pods(bare)
    assert found.where == "spec.runner" and found.bare and found.pod == {"spec": CONTAINERS}


def test_a_batch_job_is_a_workload_and_a_volcano_job_is_not() -> None:
    """Matched by API group and kind: batch/v1 Job has its template read as a workload;
    batch.volcano.sh's Job has templates inside it."""
    batch = {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": template()}}
    volcano = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "spec": {"template": template()},
    }
    assert pod_template(batch) is not None and embedded_pods(batch) == []
    assert pod_template(volcano) is None
    assert [e.where for e in embedded_pods(volcano)] == ["spec.template"]


def test_the_search_is_bounded_in_depth() -> None:
    deep: dict[str, Any] = template()
    for _ in range(40):
        deep = {"next": deep}
    assert embedded_pods({"apiVersion": "example.com/v1", "kind": "Deep", "spec": deep}) == []
