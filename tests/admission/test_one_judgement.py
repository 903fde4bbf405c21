"""One workload through every place that judges it, the same judgement from each: the
webhook (its pod, and the workload preview at `kubectl apply`), `dry-run`, `scan` and
`convert`. The rules of this change (a GPU resource in pod-level `spec.resources`) live in the
translation all of them call; this is the proof that none walks its own way around it."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from hami_dra_webhook.admission.admitted import AdmissionRules
from hami_dra_webhook.cli.main import main
from hami_dra_webhook.core.migration.pools import Scope
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
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


GPU_TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app": "trainer"}},
    "spec": {
        "containers": [
            {
                "name": "main",
                "image": "registry.example/train:1",
                "resources": {"limits": {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 4000}},
            }
        ]
    },
}


def _workload(labels: dict[str, str] | None = None) -> dict[str, Any]:
    template = {**GPU_TEMPLATE, "metadata": {"labels": {"app": "trainer", **(labels or {})}}}
    return {**DEPLOYMENT, "spec": {**DEPLOYMENT["spec"], "template": template}}


# (case, the workload, the rules' flags, what every tool says: converted or left)
CASES = [
    ("converted", _workload(), [], "converted"),
    ("excluded namespace", _workload(), ["--excluded-namespaces", "team-a"], "left"),
    ("outside scope workloads", _workload(), ["--scope", "workloads"], "left"),
    (
        "opted in under scope workloads",
        _workload({"hami.io/gpu-migration": "dra"}),
        ["--scope", "workloads"],
        "converted",
    ),
    ("opted out", _workload({"hami.io/webhook": "ignore"}), [], "left"),
]


@pytest.mark.parametrize(
    ("workload", "flags", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_every_tool_takes_the_rules_judgement(
    tmp_path: Path, workload: dict[str, Any], flags: list[str], expected: str
) -> None:
    """The same rules (excluded namespaces, the migration scope, the opt-out label) through
    dry-run, scan, convert and the rules the webhook's preview holds: one judgement."""
    manifest = tmp_path / "trainer.yaml"
    manifest.write_text(yaml.safe_dump(workload))
    _, out, _ = cli("dry-run", "-o", "json", *flags, str(manifest))
    [item] = json.loads(out)["items"]
    assert item["outcome"] == ("converted" if expected == "converted" else "unchanged")
    _, out, _ = cli("scan", "-o", "json", *flags, str(manifest))
    [report] = json.loads(out)["workloads"]
    assert (report["outcome"] == "converted") == (expected == "converted"), report
    _, _, err = cli("convert", "--out", str(tmp_path / "out"), *flags, str(manifest))
    written = yaml.safe_load_all((tmp_path / "out" / "trainer.yaml").read_text())
    changed = next(iter(written)) != workload
    assert changed == (expected == "converted"), err
    if expected == "left":
        assert "left" in err or "excluded" in err, err  # convert says why it left it
    # the webhook's rules, as the chart's values set them
    scope = Scope(flags[1]) if flags[:1] == ["--scope"] else Scope()
    excluded = frozenset({flags[1]}) if flags[:1] == ["--excluded-namespaces"] else frozenset()
    rules = AdmissionRules(DEFAULT_POLICY, excluded_namespaces=excluded, scope=scope)
    [judged] = rules.templates(workload, "team-a").items
    assert (judged.decision.outcome == "converted") == (expected == "converted")
