"""Issue 64, item 4: an operator's object decides its pods' scheduler wherever it names it, and
the webhook's label and annotation go where its pods get them, or nowhere with a note
(files/operators.py; docs/migration.md "What operators copy to pods"). Each shape on a small
manifest of this project's own; the real-world ones are in ../shared/corpora/realworld4."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.migrate.test_round_three import converted, dry_run, scanned

MODEL_SERVING = """\
apiVersion: workload.serving.volcano.sh/v1alpha1
kind: ModelServing
metadata: {name: llm, namespace: team-a}
spec:
  OWNER
  template:
    roles:
    - name: main
      replicas: 1
      entryTemplate:
        spec:
          TEMPLATE
          containers:
          - name: leader
            image: registry.example/vllm:1
            resources:
              limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: 8000}
"""


def _serving(owner: str, template: str) -> str:
    return MODEL_SERVING.replace("OWNER", owner).replace("TEMPLATE", template)


@pytest.mark.parametrize(
    ("owner", "template"),
    [
        ("replicas: 1", "restartPolicy: Always"),  # the CRD's default: volcano
        ("schedulerName: volcano", "restartPolicy: Always"),
        ("schedulerName: volcano", "schedulerName: default-scheduler"),  # the owner's wins
    ],
)
def test_a_model_servings_scheduler_replaces_its_templates(
    owner: str, template: str, tmp_path: Path
) -> None:
    text = _serving(owner, template)
    code, item, _ = dry_run(text)
    (inside,) = item["embedded"]
    assert code == 0 and inside["outcome"] == "unchanged", inside
    assert "its pods take their owner's spec.schedulerName volcano" in inside["warnings"][0]
    _, (workload,) = scanned(text)
    assert workload["outcome"] != "converted", workload
    code, (written,), err = converted(text, tmp_path, "--embedded")
    assert code == 0 and "nvidia.com/gpumem" in str(written), err
    assert "owner's spec.schedulerName volcano, so they are left unchanged" in err


def test_a_model_serving_on_hamis_scheduler_is_moved_to_kube_scheduler(tmp_path: Path) -> None:
    """The owner names HAMi's scheduler, which leaves with legacy HAMi: --embedded converts the
    template and sets the owner's field to default-scheduler (removing it would give the CRD's
    default, volcano)."""
    text = _serving("schedulerName: hami-scheduler", "schedulerName: volcano")
    code, item, _ = dry_run(text)
    (inside,) = item["embedded"]
    assert code == 0 and inside["outcome"] == "converted", inside
    code, (written, template), err = converted(text, tmp_path, "--embedded")
    assert code == 0, err
    assert written["spec"]["schedulerName"] == "default-scheduler"
    entry = written["spec"]["template"]["roles"][0]["entryTemplate"]
    assert (
        entry["spec"]["resourceClaims"][0]["resourceClaimTemplateName"]
        == (template["metadata"]["name"])
    )
    assert entry["metadata"]["labels"] == {"hami.io/dra": "true"}
    assert "spec.schedulerName hami-scheduler leaves with legacy HAMi" in err


RAY_CLUSTER = """\
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: ray
  namespace: team-a
  LABELS
spec:
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: head
          image: rayproject/ray:2.9.0
          resources:
            limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: 8000}
"""


def test_kuberays_batch_scheduler_label_decides(tmp_path: Path) -> None:
    volcano = RAY_CLUSTER.replace("LABELS", "labels: {ray.io/scheduler-name: volcano}")
    code, item, _ = dry_run(volcano)
    (inside,) = item["embedded"]
    assert inside["outcome"] == "unchanged", inside
    assert "owner's label ray.io/scheduler-name volcano" in inside["warnings"][0]
    plain = RAY_CLUSTER.replace("LABELS", "labels: {team: ml}")
    code, item, _ = dry_run(plain)
    (inside,) = item["embedded"]
    assert code == 0 and inside["outcome"] == "converted", inside
    code, (written, _), err = converted(plain, tmp_path, "--embedded")
    assert written["metadata"]["labels"] == {"team": "ml"}, err
    head = written["spec"]["headGroupSpec"]["template"]
    assert head["metadata"]["labels"] == {"hami.io/dra": "true"}


OWN_SPEC = """\
apiVersion: example.com/v1
kind: GpuRunner
metadata: {name: runner, namespace: team-a, labels: {team: ml}}
spec:
  containers:
  - name: main
    image: registry.example/run:1
    resources:
      limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: 8000}
"""


def test_an_objects_own_metadata_gets_no_pod_label(tmp_path: Path) -> None:
    """An object whose own spec is the pod spec: its metadata is its own, so --embedded writes
    the claims and says the pods will lack the label (not put it on the object)."""
    code, (written, _), err = converted(OWN_SPEC, tmp_path, "--embedded")
    assert code == 0, err
    assert written["metadata"] == {
        "name": "runner",
        "namespace": "team-a",
        "labels": {"team": "ml"},
    }
    assert written["spec"]["resourceClaims"][0]["name"] == "main-gpu"
    assert "the object's own metadata does not reach its pods" in err


SERVING_RUNTIME = """\
apiVersion: serving.kserve.io/v1alpha1
kind: ClusterServingRuntime
metadata: {name: vllm}
spec:
  supportedModelFormats: [{name: vllm, autoSelect: true}]
  schedulerName: hami-scheduler
  containers:
  - name: kserve-container
    image: vllm/vllm-openai:v0.6.3
    resources:
      limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: 8000}
"""


def test_a_serving_runtime_is_left_with_why(tmp_path: Path) -> None:
    code, (written,), err = converted(SERVING_RUNTIME, tmp_path, "--embedded")
    assert code == 0 and written["spec"]["schedulerName"] == "hami-scheduler", err
    assert "it has no resourceClaims, and its pods' labels come from spec.labels" in err
    assert "hami.io/dra" not in str(written)
