"""One workload through every place that judges it, the same judgement from each: the
webhook (its pod, and the workload preview at `kubectl apply`), `dry-run`, `scan` and
`convert`. The rules of this change (a GPU resource in pod-level `spec.resources`) live in the
translation all of them call; this is the proof that none walks its own way around it."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import yaml

from hami_dra_webhook.cli.main import main
from tests.admission.test_handlers import (
    PodAdmission,
    Recorded,
    WorkloadAdmission,
    _bytes,
    _mutator,
)
from tests.support.loop import run
from tests.support.reviews import review

TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app": "trainer"}},
    "spec": {
        "resources": {"limits": {"nvidia.com/gpu": 1, "cpu": "1"}},
        "containers": [{"name": "main", "image": "registry.example/train:1"}],
    },
}
DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "trainer", "namespace": "team-a"},
    "spec": {"selector": {"matchLabels": {"app": "trainer"}}, "template": TEMPLATE},
}
REASON = "pod-level-gpu-resources"
WORDS = "pod-level resources (spec.resources) name nvidia.com/gpu"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdin=io.StringIO(""), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_a_pod_level_gpu_is_refused_alike_everywhere(tmp_path: Path) -> None:
    manifest = tmp_path / "trainer.yaml"
    manifest.write_text(yaml.safe_dump(DEPLOYMENT))
    # the webhook: the pod its ReplicaSet creates
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "trainer-"}, **TEMPLATE}
    events = Recorded()
    status, body = run(PodAdmission(_mutator(), events)(_bytes(review(pod))))
    answer = json.loads(body)["response"]
    assert (status, answer["allowed"]) == (200, False) and WORDS in answer["status"]["message"]
    assert events.results[0].reason == REASON
    # the webhook: the preview at kubectl apply says the pods will be refused
    document = review(DEPLOYMENT, kind="Deployment", group="apps", resource="deployments")
    preview = Recorded()
    _, body = run(WorkloadAdmission(_mutator(), preview)(_bytes(document)))
    assert preview.seen[-1] == "previewed refused"
    said = " ".join(w.strip() for w in json.loads(body)["response"]["warnings"])  # 120-char lines
    assert "will be refused at admission" in said and WORDS in said
    # dry-run
    code, out, _ = cli("dry-run", "-o", "json", str(manifest))
    [item] = json.loads(out)["items"]
    assert (code, item["outcome"], item["reason"]) == (2, "refused", REASON)
    # scan
    code, out, _ = cli("scan", "-o", "json", str(manifest))
    [workload] = json.loads(out)["workloads"]
    assert (code, workload["outcome"], workload["reason"]) == (2, "refused", REASON)
    # convert: left as it is, and said
    code, _, err = cli("convert", "--out", str(tmp_path / "out"), str(manifest))
    assert code == 2 and WORDS in err
    assert yaml.safe_load((tmp_path / "out" / "trainer.yaml").read_text()) == DEPLOYMENT
