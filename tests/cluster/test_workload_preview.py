"""The workloads' preview (admission/workloads.py), in process: an AdmissionReview of a
workload in, the answer out. It always allows and never patches; its warnings say what each pod
template's pods will become, worded as the pod webhook words them, or why they will be refused
and where that shows. The offline template store is never asked: a preview creates nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hami_dra_webhook.admission.admitted import AdmissionRules
from hami_dra_webhook.admission.mutator import PodMutator
from hami_dra_webhook.admission.workloads import (
    MAX_TEMPLATES,
    MAX_WARNINGS_TOTAL,
    Preview,
    WorkloadPreview,
    warnings,
)
from hami_dra_webhook.cluster.templates.store import OfflineTemplateStore
from hami_dra_webhook.core.migration.pools import Scope
from hami_dra_webhook.core.model.types import MAX_WARNING_LENGTH
from hami_dra_webhook.core.review.wire import parse_review
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from tests.support.reviews import review

GPU = {
    "name": "server",
    "image": "i",
    "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "16384"}},
}
# DaoCloud's count name under HAMi's default names: refused, with the key that would fix it
TOO_MUCH = {
    "name": "big",
    "image": "i",
    "resources": {"limits": {"nvidia.com/vgpu": "1", "nvidia.com/gpumem": "2048"}},
}


def _mutator() -> PodMutator:
    return PodMutator(rules=AdmissionRules(DEFAULT_POLICY), store=OfflineTemplateStore())


def _deployment(
    *containers: dict[str, Any], labels: dict[str, str] | None = None
) -> dict[str, Any]:
    template = {
        "metadata": {"labels": {"app": "a", **(labels or {})}},
        "spec": {"containers": list(containers)},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "inference", "namespace": "team-a"},
        "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": template},
    }


def _preview(
    workload: dict[str, Any], preview: WorkloadPreview | None = None, operation: str = "CREATE"
) -> Preview:
    document = review(
        workload, operation=operation, kind=workload["kind"], group="apps", resource="deployments"
    )
    request = parse_review(json.dumps(document).encode()).request
    return (preview or WorkloadPreview(_mutator())).answer(request)


def test_a_converted_workload_gets_its_pods_summary() -> None:
    answered = _preview(_deployment(GPU))
    response = answered.answer["response"]
    assert answered.outcome == "converted"
    assert response["allowed"] is True and "patch" not in response and "status" not in response
    [line] = response["warnings"]
    assert line.startswith(
        'pods of Deployment inference: container "server": 1 GPU, 16384 MiB, no SM limit -> hami-gpu-'
    )


def test_what_the_tools_warn_of_shows_too() -> None:
    """A container that sets NVIDIA_VISIBLE_DEVICES=all sees every GPU under the nvidia
    runtime: the pod webhook does not read env for it (core/translate/lints.py), the preview says it."""
    every = dict(GPU, env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])
    pieces = _preview(_deployment(every)).answer["response"]["warnings"]
    assert " ".join(p.strip() for p in pieces).endswith(
        'pods of Deployment inference: container "server": sets NVIDIA_VISIBLE_DEVICES=all:'
        " with the nvidia runtime it sees every GPU of its node, whatever its claim holds;"
        " remove it"
    ), pieces


def test_a_refused_workload_is_allowed_and_says_why_and_where_it_shows() -> None:
    answered = _preview(_deployment(TOO_MUCH))
    response = answered.answer["response"]
    assert answered.outcome == "refused" and response["allowed"] is True
    pieces = response["warnings"]
    assert all(len(piece) <= MAX_WARNING_LENGTH for piece in pieces)  # kept whole by kubectl
    assert all(piece.startswith("  ") for piece in pieces[1:])
    line = " ".join(piece.strip() for piece in pieces)
    assert line.startswith(
        "pods of Deployment inference will be refused at admission (a FailedCreate event of its ReplicaSet): "
    )
    # the refusal's own reason, whole, as the pods get it
    assert line.endswith(
        "set nvidia.resourceCountName: nvidia.com/vgpu in the device config (the chart's"
        " deviceConfig); otherwise remove it"
    )


def test_opted_out_out_of_scope_excluded_and_gpu_free_templates_say_nothing() -> None:
    assert (
        "warnings"
        not in _preview(_deployment(GPU, labels={"hami.io/webhook": "ignore"})).answer["response"]
    )
    scoped = WorkloadPreview(
        PodMutator(AdmissionRules(DEFAULT_POLICY, scope=Scope("workloads")), OfflineTemplateStore())
    )
    assert _preview(_deployment(GPU), scoped).outcome == "none"
    assert (
        _preview(_deployment(GPU, labels={"hami.io/gpu-migration": "dra"}), scoped).outcome
        == "converted"
    )
    system = _deployment(GPU)
    system["metadata"]["namespace"] = "kube-system"
    document = review(
        system, kind="Deployment", group="apps", resource="deployments", namespace="kube-system"
    )
    assert (
        WorkloadPreview(_mutator())
        .answer(parse_review(json.dumps(document).encode()).request)
        .outcome
        == "none"
    )
    assert _preview(_deployment({"name": "c", "image": "i"})).outcome == "none"
    assert _preview(_deployment(GPU), operation="DELETE").outcome == "none"


def test_custom_kinds_are_judged_template_by_template_within_bounds() -> None:
    many = [
        {"replicas": 1, "template": {"spec": {"containers": [dict(GPU, name=f"c{i}")]}}}
        for i in range(MAX_TEMPLATES + 5)
    ]
    cluster = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "ray", "namespace": "team-a"},
        "spec": {"workerGroupSpecs": many},
    }
    answered = _preview(cluster)
    pieces = answered.answer["response"]["warnings"]
    assert answered.outcome == "converted"
    assert sum(len(piece) for piece in pieces) <= MAX_WARNINGS_TOTAL
    assert pieces[0].startswith(
        'pods of RayCluster ray spec.workerGroupSpecs[0].template: container "c0": 1 GPU'
    )
    assert pieces[-1].startswith("... ") and pieces[-1].endswith(
        " more: `hami-dra-webhook dry-run` says all"
    )


def test_warnings_split_long_lines_and_stop_within_what_kube_apiserver_passes_on() -> None:
    assert warnings(["short"]) == ["short"]
    split = warnings(["word " * 60])
    assert len(split) == 3 and all(len(p) <= MAX_WARNING_LENGTH for p in split)
    assert warnings(["x" * 300])[1].startswith("  x")
    many = warnings([f"line {i} " + "y" * 100 for i in range(100)])
    assert sum(len(p) for p in many) <= MAX_WARNINGS_TOTAL
    shown = len(many) - 1
    assert many[-1] == f"... {100 - shown} more: `hami-dra-webhook dry-run` says all"


def test_off_the_loop_it_answers_the_same_without_the_loops_cache() -> None:
    """A large body is judged on the off-loop thread (server/app.py): without the translation
    cache, which belongs to the event loop, and with the same answer."""
    preview = WorkloadPreview(_mutator())
    document = review(_deployment(GPU), kind="Deployment", group="apps", resource="deployments")
    request = parse_review(json.dumps(document).encode()).request
    cache = preview.mutator.cache
    off_loop = preview.answer(request, cached=False)
    assert (cache.hits, cache.misses) == (0, 0)
    on_loop = preview.answer(request)
    assert cache.misses == 1
    assert off_loop == on_loop


def test_the_running_webhook_previews_a_large_custom_resource(tmp_path: Path) -> None:
    """Through the real process over TLS: a RayCluster of 300 KiB (over the size that is judged
    off the event loop) is allowed, with the warnings of its templates, and counted."""
    from tests.support.webhook_process import Webhook

    padding = {"name": "PAD", "value": "x" * 8000}
    groups = [
        {"template": {"spec": {"containers": [dict(GPU, name=f"c{i}", env=[padding])]}}}
        for i in range(40)
    ]
    cluster = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "ray", "namespace": "team-a"},
        "spec": {"workerGroupSpecs": groups},
    }
    document = review(cluster, kind="RayCluster", group="ray.io", resource="rayclusters")
    body = json.dumps(document).encode()
    assert len(body) > 256 * 1024
    webhook = Webhook(tmp_path)
    try:
        status, answer = webhook.post(body, path="/validate-workloads")
        assert status == 200 and answer["response"]["allowed"] is True
        warnings_ = answer["response"]["warnings"]
        assert warnings_[0].startswith(
            'pods of RayCluster ray spec.workerGroupSpecs[0].template: container "c0"'
        )
        status, metrics = webhook.get_ops("/metrics")
        assert 'hami_dra_workload_previews_total{outcome="converted"} 1.0' in metrics.decode()
    finally:
        webhook.stop()
