"""What the second real-world corpus found (issue 37), each on a small manifest of this
project's own: templates judged as their pods are admitted, container-shaped maps, names HAMi
renamed, refusals naming the container's own resources, and the warnings of that round."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import yaml

from hami_dra_webhook.cli.main import main

VOLCANO_JOB = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: train, namespace: team-a}
spec:
  minAvailable: 1
  SCHEDULER
  tasks:
  - name: worker
    replicas: 2
    template:
      spec:
        containers:
        - name: train
          image: registry.example/train:1
          resources:
            limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: 8000}
"""

INFERENCE_SERVICE = """\
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata: {name: llm, namespace: team-a}
spec:
  predictor:
    minReplicas: 1
    model:
      modelFormat: {name: huggingface}
      resources:
        limits: {cpu: "2", nvidia.com/gpu: 1, nvidia.com/gpumem: 4096, nvidia.com/gpucores: 30}
  transformer:
    containers:
    - name: pre
      image: registry.example/pre:1
"""

TRAIN_JOB = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: fine-tune, namespace: team-a}
spec:
  runtimeRef: {name: torch-distributed}
  trainer:
    numNodes: 2
    resourcesPerNode:
      limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: 8000}
"""


def pod(resources: str, *, namespace: str = "team-a", extra: str = "", env: str = "") -> str:
    return (
        f"apiVersion: v1\nkind: Pod\nmetadata: {{name: p, namespace: {namespace}}}\nspec:\n"
        f"{extra}  containers:\n  - name: main\n    image: registry.example/app:1\n{env}"
        f"    resources:\n      limits: {resources}\n"
    )


def run(stdin: str, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdin=io.StringIO(stdin), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def dry_run(text: str, *extra: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = run(text, "dry-run", "-o", "json", *extra, "-")
    return code, json.loads(out)["items"][0], err


def scanned(text: str, *extra: str) -> tuple[int, list[dict[str, Any]]]:
    code, out, _ = run(text, "scan", "-o", "json", *extra, "-")
    return code, json.loads(out)["workloads"]


def converted(text: str, tmp_path: Path, *extra: str) -> tuple[int, list[Any], str]:
    source = tmp_path / "in.yaml"
    source.write_text(text)
    code, _, err = run("", "convert", "--out", str(tmp_path / "out"), *extra, str(source))
    written = (tmp_path / "out" / "in.yaml").read_text()
    return code, [d for d in yaml.safe_load_all(written) if d is not None], err


# Class 1: an owner's scheduler


def test_a_volcano_jobs_pods_take_its_scheduler(tmp_path: Path) -> None:
    """No schedulerName in the template: the pods get the Job's, volcano by default, and the
    webhook leaves pods of another scheduler. dry-run said "refused at admission", exit 2."""
    job = VOLCANO_JOB.replace("SCHEDULER", "queue: default")
    code, item, _ = dry_run(job)
    (inside,) = item["embedded"]
    assert code == 0 and inside["outcome"] == "unchanged"
    assert "its pods take their owner's spec.schedulerName volcano" in inside["warnings"][0]
    code, workloads = scanned(job)
    assert code == 1 and "schedulerName volcano" in " ".join(workloads[0]["attention"])
    code, documents, err = converted(job, tmp_path, "--embedded")
    assert code == 0 and documents == [yaml.safe_load(job)], err
    assert "so they are left unchanged" in err


def test_a_volcano_job_on_the_default_scheduler_is_converted(tmp_path: Path) -> None:
    job = VOLCANO_JOB.replace("SCHEDULER", "schedulerName: default-scheduler")
    code, item, _ = dry_run(job)
    assert code == 0 and item["embedded"][0]["outcome"] == "converted"
    code, documents, _err = converted(job, tmp_path, "--embedded")
    template = documents[0]["spec"]["tasks"][0]["template"]
    assert template["spec"]["resourceClaims"][0]["resourceClaimTemplateName"].startswith("hami-")
    assert "schedulerName" not in template["spec"]  # the Job's, never written into it


def test_pods_of_excluded_namespaces_are_left() -> None:
    """kube-system and the chart's namespace are never sent to the webhook."""
    for namespace in ("kube-system", "hami-system"):
        code, item, _ = dry_run(pod("{nvidia.com/gpu: 1}", namespace=namespace))
        assert code == 0 and item["outcome"] == "unchanged"
        assert item["warnings"] == [
            f"namespace {namespace} is excluded from conversion; nothing changed"
        ]
    code, item, _ = dry_run(pod("{nvidia.com/gpu: 1}", namespace="ml"), "--excluded-namespaces=ml")
    assert item["outcome"] == "unchanged"
    code, item, _ = dry_run(
        pod("{nvidia.com/gpu: 1}", namespace="kube-system"), "--excluded-namespaces="
    )
    assert item["outcome"] == "converted"


# Class 2: container-shaped maps


def test_a_kserve_model_is_found_and_converted_with_embedded(tmp_path: Path) -> None:
    """predictor.model carries HAMi resources outside any containers list: scan said no
    workload asked for legacy resources."""
    code, item, _ = dry_run(INFERENCE_SERVICE)
    assert [(e["path"], e["outcome"]) for e in item["embedded"]] == [
        ("spec.predictor.model", "converted")
    ]
    assert (
        'container "kserve-container": 1 GPU, 4096 MiB, 30% of SMs'
        in item["embedded"][0]["info"][0]
    )
    code, workloads = scanned(INFERENCE_SERVICE)
    assert code == 0 and [w["embedded_at"] for w in workloads] == ["spec.predictor.model"]
    _code, documents, _err = converted(INFERENCE_SERVICE, tmp_path, "--embedded")
    predictor = documents[0]["spec"]["predictor"]
    claim = predictor["resourceClaims"][0]
    assert predictor["model"]["resources"] == {
        "limits": {"cpu": "2"},
        "claims": [{"name": claim["name"]}],
    }
    assert predictor["labels"] == {"hami.io/dra": "true"}
    assert predictor["annotations"]["hami.io/converted-from"].startswith("kserve-container: gpu=1")
    assert "name" not in predictor["model"]  # KServe names it; nothing added
    assert (
        documents[0]["spec"]["transformer"]
        == yaml.safe_load(INFERENCE_SERVICE)["spec"]["transformer"]
    )
    assert documents[1]["kind"] == "ResourceClaimTemplate"
    assert documents[1]["metadata"]["name"] == claim["resourceClaimTemplateName"]


def test_a_trainjobs_resources_per_node_are_found_and_left(tmp_path: Path) -> None:
    code, item, _ = dry_run(TRAIN_JOB)
    assert code == 0
    (inside,) = item["embedded"]
    assert inside["path"] == "spec.trainer.resourcesPerNode" and inside["outcome"] == "converted"
    assert "rewrites" not in " ".join(item["warnings"])
    _code, documents, err = converted(TRAIN_JOB, tmp_path, "--embedded")
    assert documents == [yaml.safe_load(TRAIN_JOB)] and "no place for claims" in err


# Class 3: names HAMi renamed, and siblings no configuration knows


def test_ascend910b_names_its_replacements() -> None:
    code, item, _ = dry_run(pod("{huawei.com/Ascend910B: 1, huawei.com/Ascend910B-memory: 4096}"))
    assert code == 0 and item["outcome"] == "unchanged"
    assert item["warnings"] == [
        'container "main": huawei.com/Ascend910B was HAMi\'s name for 910B NPUs from v2.4.0 to'
        " v2.6.1 (split by chip in v2.7); no device plugin of this configuration offers it, so"
        " the pod stays Pending: write huawei.com/Ascend910B2, huawei.com/Ascend910B3 or"
        " huawei.com/Ascend910B4 (the chip of its nodes)",
        'container "main": huawei.com/Ascend910B-memory was HAMi\'s name for 910B NPUs from'
        " v2.4.0 to v2.6.1 (split by chip in v2.7); no device plugin of this configuration"
        " offers it, so the pod stays Pending: write huawei.com/Ascend910B2-memory,"
        " huawei.com/Ascend910B3-memory or huawei.com/Ascend910B4-memory (the chip of its nodes)",
    ]
    code, workloads = scanned(pod("{huawei.com/Ascend910B: 1}"))
    assert code == 1 and workloads[0]["outcome"] == "attention"


def test_an_unknown_sibling_names_the_familys() -> None:
    _, item, _ = dry_run(pod("{huawei.com/Ascend310P-mem: 1024}"))
    assert "(Huawei Ascend NPU: huawei.com/Ascend310P-memory)" in item["warnings"][0]
    _, item, _ = dry_run(pod("{nvidia.com/gpu: 1, nvidia.com/gpu-memory: 1024}"))
    assert item["outcome"] == "refused"  # a converted container: refused, naming the key
    _, item, _ = dry_run(pod("{nvidia.com/gpu-memory: 1024}"))
    assert "(NVIDIA GPU: nvidia.com/gpumem or nvidia.com/gpumem-percentage)" in item["warnings"][0]
    # Names of a vendor's own device plugin are not HAMi's: nothing said.
    _, item, _ = dry_run(pod("{huawei.com/Ascend910: 1, nvidia.com/mig-1g.10gb: 1}"))
    assert item["warnings"] == [] and item["outcome"] == "unchanged"


# Class 4: a refusal names the container's own resources


def test_a_refusal_names_what_the_container_asks() -> None:
    code, item, _ = dry_run(pod("{huawei.com/Ascend310P: 1, huawei.com/Ascend310P-memory: 1024}"))
    assert code == 2
    assert (
        "Huawei Ascend NPU (huawei.com/Ascend310P, huawei.com/Ascend310P-memory) is not converted"
        in item["message"]
    )


# The warnings of this round


def test_hyphens_for_spaces_in_a_type() -> None:
    text = pod("{nvidia.com/gpu: 1}").replace(
        "metadata: {name: p, namespace: team-a}",
        "metadata:\n  name: p\n  namespace: team-a\n  annotations:\n"
        "    nvidia.com/use-gputype: NVIDIA-GeForce-RTX-4090\n"
        "    nvidia.com/nouse-gputype: 'NVIDIA-H20 '",
    )
    _, item, _ = dry_run(text)
    assert (
        "use-gputype 'NVIDIA-GeForce-RTX-4090' selects no GPU (NVML names GPUs with spaces, not"
        " hyphens, in legacy HAMi and under DRA): write 'NVIDIA GeForce RTX 4090'"
    ) in item["warnings"]
    assert any("nouse-gputype 'NVIDIA-H20' excludes nothing" in w for w in item["warnings"])


def test_hami_scheduler_without_a_hami_resource() -> None:
    _, item, _ = dry_run(pod("{cpu: 1}", extra="  schedulerName: hami-scheduler\n"))
    assert item["warnings"] == [
        "schedulerName hami-scheduler without any HAMi resource: that scheduler leaves with"
        " legacy HAMi, and the pod would stay Pending; remove schedulerName"
    ]


def test_visible_devices_all() -> None:
    env = "    env:\n    - {name: NVIDIA_VISIBLE_DEVICES, value: all}\n"
    _, item, _ = dry_run(pod("{nvidia.com/gpu: 1}", env=env))
    assert (
        'container "main": sets NVIDIA_VISIBLE_DEVICES=all: with the nvidia runtime it sees every'
        " GPU of its node, whatever its claim holds; remove it"
    ) in item["warnings"]


def test_a_quotas_preview_is_what_convert_writes(tmp_path: Path) -> None:
    quota = (
        "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q, namespace: team-a}\n"
        "spec:\n  hard:\n    requests.nvidia.com/gpu: 4\n"
    )
    _, item, _ = dry_run(quota)
    devices = "hami-core-gpu.project-hami.io.deviceclass.resource.k8s.io/devices"
    assert item["outcome"] == "converted" and item["object"]["spec"]["hard"][devices] == "4"
    _, documents, _ = converted(quota, tmp_path)
    assert documents == [item["object"]]


def test_flow_maps_keep_their_spaces(tmp_path: Path) -> None:
    text = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: { name: d, namespace: team-a }\nspec:\n"
        "  selector:\n    matchLabels: { app: d }\n  template:\n    metadata:\n"
        "      labels: { app: d }\n    spec:\n      containers:\n      - name: c\n"
        "        image: i\n        ports: [{ containerPort: 80 }]\n"
        "        resources:\n          limits: { nvidia.com/gpu: 1 }\n"
    )
    source = tmp_path / "in.yaml"
    source.write_text(text)
    run("", "convert", "--out", str(tmp_path / "out"), str(source))
    written = (tmp_path / "out" / "in.yaml").read_text()
    for line in (
        "metadata: { name: d, namespace: team-a }",
        "matchLabels: { app: d }",
        "ports: [{ containerPort: 80 }]",
        "labels: { app: d, hami.io/dra: 'true' }",
    ):
        assert line in written, written


def test_volcano_jobs_converted_at_admission_when_the_chart_says_so(tmp_path: Path) -> None:
    """--volcano-jobs convert: as the chart's volcano.convertJobs, the Job's templates are
    converted when the Job is created (its PodGroup and queue then see claims)."""
    job = VOLCANO_JOB.replace("SCHEDULER", "queue: default")
    code, item, _ = dry_run(job, "--volcano-jobs", "convert")
    assert code == 0 and item["embedded"][0]["outcome"] == "converted"
    code, workloads = scanned(job, "--volcano-jobs", "convert")
    assert workloads[0]["outcome"] == "converted"
    code, documents, _err = converted(job, tmp_path, "--embedded", "--volcano-jobs", "convert")
    spec = documents[0]["spec"]["tasks"][0]["template"]["spec"]
    assert spec["resourceClaims"] and "schedulerName" not in spec
