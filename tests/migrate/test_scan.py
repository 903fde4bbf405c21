"""`scan` over a manifest tree (tests/manifests) and over a real cluster."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from hami_dra_webhook.cli.main import main
from tests.support.cluster import Cluster

TREE = Path(__file__).parents[1] / "manifests"


def scan(*args: str, stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", *args], stdin=io.StringIO(stdin), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def by_name(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {w["name"]: w for w in document["workloads"]}


def test_manifest_tree_outcomes_and_exit_code() -> None:
    code, out, _ = scan(str(TREE), "-o", "json")
    assert code == 2  # big-memory would be refused
    report = json.loads(out)
    workloads = by_name(report)
    assert {name: w["outcome"] for name, w in workloads.items()} == {
        "triton": "converted",
        "notebooks": "refused",  # gpumem-percentage without memory sizes, as dry-run says
        "nightly": "attention",
        "big-memory": "refused",
        "exclusive-cores": "attention",
        "probe": "converted",
    }
    assert "no-gpu" not in workloads and "triton" in workloads
    triton = workloads["triton"]["containers"][0]
    assert triton["legacy"] == {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpumem": "16384",
        "nvidia.com/gpucores": "50",
    }
    assert triton["dra"] == "1 GPU, 16384 MiB, 50% of SMs"
    assert "gpumem is in MiB" in workloads["big-memory"]["message"]
    assert "needs the cluster's GPU memory sizes" in workloads["notebooks"]["message"]
    nightly = workloads["nightly"]
    assert nightly["selectors"] == "type contains A100"
    assert any("mutex" in a for a in nightly["attention"]) and any(
        "priority" in a for a in nightly["attention"]
    )
    assert any(
        "cores 100 with part of the memory" in a for a in workloads["exclusive-cores"]["attention"]
    )
    assert report["summary"] == {
        "team-a": {"converted": 1, "attention": 1, "refused": 1},
        "team-b": {"converted": 1, "attention": 1, "refused": 1},
    }


def test_table_output_and_exit_codes_without_refusals(tmp_path: Path) -> None:
    (tmp_path / "ok.yaml").write_text((TREE / "team-a" / "apps.yaml").read_text())
    config = tmp_path / "sizes.yaml"
    config.write_text("hamiDraWebhook:\n  deviceMemorySizes: [80Gi]\n")
    code, out, _ = scan(str(tmp_path / "ok.yaml"), "--config", str(config))
    assert code == 0  # everything converts
    attention = tmp_path / "numa.yaml"
    attention.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, annotations: {nvidia.com/numa-bind: 'true'}}\n"
        "spec: {containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: 1}}}]}\n"
    )
    assert scan(str(attention))[0] == 1  # needs attention; nothing is refused
    assert "Deployment/triton" in out and "1 GPU, 16384 MiB, 50% of SMs" in out
    assert "Per namespace" in out and "NEEDS ATTENTION" in out
    # Plain columns: every row of the workload table starts its "UNDER DRA" cell where the
    # header does; details are indented lines under their workload.
    table = out.split("\n\nPer namespace")[0].splitlines()
    column = table[0].index("UNDER DRA")
    rows = [line for line in table[1:] if not line.startswith("    - ")]
    assert rows and all(line[column - 3 : column] == "   " for line in rows)
    assert all(line[column] != " " for line in rows)
    assert "\x1b" not in out, "no terminal escapes in the report"


def test_sizes_from_config_turn_attention_into_converts(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "nvidia:\n  deviceSplitCount: 10\nhamiDraWebhook:\n  deviceMemorySizes: [80Gi]\n"
    )
    _, out, _ = scan(str(TREE / "team-a" / "apps.yaml"), "--config", str(config), "-o", "json")
    report = json.loads(out)
    assert by_name(report)["notebooks"]["outcome"] == "converted"
    assert (
        by_name(report)["notebooks"]["containers"][0]["dra"]
        == "1 GPU, 25% of each card's memory, no SM limit"
    )
    assert report["notes"] == [
        "nvidia.deviceSplitCount (10): legacy HAMi put at most that many tasks on a card; DRA"
        " has no such cap and packs shares as memory and cores allow"
    ]


def test_helm_output_on_stdin() -> None:
    rendered = (TREE / "team-b" / "broken.yaml").read_text()
    code, out, _ = scan("-", "-o", "json", stdin=rendered)
    assert code == 2 and {w["name"] for w in json.loads(out)["workloads"]} == {
        "big-memory",
        "exclusive-cores",
    }


def test_bad_arguments_and_input() -> None:
    assert scan()[0] == 64  # neither paths nor --cluster: a usage error
    code, _, err = scan("missing-folder")
    assert code == 3 and "no such file" in err


def _workload(kind: str, name: str, limits: dict[str, str]) -> dict[str, Any]:
    labels = {"app": name}
    pod_spec = {
        "restartPolicy": "Never" if kind in ("Job", "CronJob") else "Always",
        "containers": [
            {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"limits": limits}}
        ],
    }
    template = {"metadata": {"labels": labels}, "spec": pod_spec}
    api = {"Deployment": "apps/v1", "Job": "batch/v1", "CronJob": "batch/v1", "Pod": "v1"}[kind]
    document: dict[str, Any] = {"apiVersion": api, "kind": kind, "metadata": {"name": name}}
    if kind == "Pod":
        document["spec"] = pod_spec
    elif kind == "Deployment":
        document["spec"] = {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": template,
        }
    elif kind == "CronJob":
        document["spec"] = {
            "schedule": "0 3 * * *",
            "jobTemplate": {"spec": {"template": template}},
        }
    else:
        document["spec"] = {"template": template}
    return document


@pytest.mark.plane
def test_cluster_scan_skips_owned_objects_and_reads_sizes(kube: Cluster) -> None:
    """Real workloads: kube-controller-manager makes the Deployment's ReplicaSet and pod; a Job
    owned by the CronJob stands for one of its runs. No webhook is registered here, so the
    objects keep their legacy requests, as in a cluster about to migrate."""
    namespace = kube.create_namespace("scan")
    gpu = {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "50"}
    kube.apply(_workload("Deployment", "d", gpu), namespace=namespace)
    kube.apply(_workload("CronJob", "nightly", gpu), namespace=namespace)
    cron_uid = kube.get("cronjob", "nightly", "-n", namespace)["metadata"]["uid"]
    run = _workload("Job", "nightly-1", gpu)
    run["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "name": "nightly",
            "uid": cron_uid,
            "controller": True,
        }
    ]
    kube.apply(run, namespace=namespace)
    kube.apply(
        _workload("Pod", "lonely", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "2Ki"}),
        namespace=namespace,
    )
    # A pod whose controller is not a workload scan lists (a RayCluster's, a Volcano Job's):
    # reported under its controller. A ConfigMap stands for the custom resource here (no CRD
    # is installed in this shared control plane; a real owner keeps the garbage collector off).
    kube.apply(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "raycluster"}},
        namespace=namespace,
    )
    owner_uid = kube.get("configmap", "raycluster", "-n", namespace)["metadata"]["uid"]
    for index in range(2):  # two pods of one template: one row
        head = _workload("Pod", f"raycluster-head-{index}", gpu)
        head["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "name": "raycluster",
                "uid": owner_uid,
                "controller": True,
            }
        ]
        kube.apply(head, namespace=namespace)
    kube.wait_for_pods(namespace, "app=d", 1)  # the Deployment's own pod, through its ReplicaSet
    code, out, _ = scan(
        "--cluster", "-n", namespace, "--kubeconfig", str(kube.plane.admin_kubeconfig), "-o", "json"
    )
    report = json.loads(out)
    assert code == 2
    assert sorted((w["kind"], w["name"], w["outcome"]) for w in report["workloads"]) == [
        ("ConfigMap", "raycluster", "converted"),
        ("CronJob", "nightly", "converted"),
        ("Deployment", "d", "converted"),
        ("Pod", "lonely", "refused"),
    ]
    assert by_name(report)["raycluster"]["embedded_at"].startswith("its pods (read from pod")
    assert (
        by_name(report)["d"]["containers"][0]["dra"]
        == "1 GPU, 50% of each card's memory, no SM limit"
    )
    # The GPU node's cards, as its ResourceSlice publishes them.
    assert report["notes"] == [
        "GPU memory sizes from the driver's ResourceSlices: 81920 MiB, 24576 MiB"
    ]
    everywhere = json.loads(
        scan("--cluster", "-A", "--kubeconfig", str(kube.plane.admin_kubeconfig), "-o", "json")[1]
    )
    mine = [w for w in everywhere["workloads"] if w["namespace"] == namespace]
    assert sorted(w["name"] for w in mine) == ["d", "lonely", "nightly", "raycluster"]


@pytest.mark.plane
def test_cluster_scan_as_someone_without_rights_says_so(kube: Cluster) -> None:
    namespace = kube.create_namespace("scan")
    kube.kubectl("create", "serviceaccount", "powerless", "-n", namespace)
    kubeconfig = kube.service_account_kubeconfig(namespace, "powerless")
    code, _, err = scan("--cluster", "-n", namespace, "--kubeconfig", str(kubeconfig))
    assert code == 3 and "403" in err


def test_annotations_without_a_dra_equivalent_need_attention() -> None:
    from hami_dra_webhook.admission.admitted import AdmissionRules
    from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
    from hami_dra_webhook.migrate.report import assess
    from hami_dra_webhook.migrate.sources import Workload

    pod = {
        "metadata": {
            "annotations": {
                "nvidia.com/vgpu-mode": "hami-core",
                "nvidia.com/numa-bind": "true",
                "hami.io/node-scheduler-policy": "spread",
                "hami.io/gpu-scheduler-policy": "binpack",
            }
        },
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}},
                }
            ]
        },
    }
    report = assess(Workload("Pod", "ns", "p", pod, ""), AdmissionRules(DEFAULT_POLICY))
    assert report.outcome == "attention"
    assert [a.split(":")[0] for a in report.attention] == [
        "annotation nvidia.com/vgpu-mode",
        "annotation nvidia.com/numa-bind",
        "annotation hami.io/gpu-scheduler-policy",
        "annotation hami.io/node-scheduler-policy",
    ]
    other = dict(pod, spec=pod["spec"], metadata={"annotations": {"nvidia.com/vgpu-mode": "mig"}})
    assert (
        assess(Workload("Pod", "ns", "p", other, ""), AdmissionRules(DEFAULT_POLICY)).outcome
        == "refused"
    )
    foreign = {"spec": {**pod["spec"], "schedulerName": "volcano"}}
    left = assess(Workload("Pod", "ns", "p", foreign, ""), AdmissionRules(DEFAULT_POLICY))
    assert left.outcome == "attention" and left.attention[0].startswith(
        "left unchanged: schedulerName volcano"
    )


def test_init_and_app_gpu_containers_need_attention() -> None:
    """Legacy HAMi counted the peak of init and app containers; DRA holds both claims at once."""
    from hami_dra_webhook.admission.admitted import AdmissionRules
    from hami_dra_webhook.core.outcome.decision import INIT_CLAIMS_HELD
    from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
    from hami_dra_webhook.migrate.report import assess
    from hami_dra_webhook.migrate.sources import Workload

    def container(name: str, memory: str) -> dict[str, Any]:
        limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": memory}
        return {"name": name, "image": "i", "resources": {"limits": limits}}

    pod = {
        "spec": {
            "initContainers": [container("load", "20000")],
            "containers": [container("serve", "20000")],
        }
    }
    report = assess(Workload("Pod", "ml", "p", pod, ""), AdmissionRules(DEFAULT_POLICY))
    assert report.outcome == "attention"
    assert INIT_CLAIMS_HELD in report.attention
    only_app = {"spec": {"containers": [container("serve", "20000")]}}
    assert (
        assess(Workload("Pod", "ml", "q", only_app, ""), AdmissionRules(DEFAULT_POLICY)).outcome
        == "converted"
    )


HELM_TEMPLATE = """apiVersion: v1
kind: Pod
metadata:
  name: {{ .Release.Name }}
  labels: {{- include "x.labels" . | nindent 4 }}
"""


def test_an_unparsable_file_is_reported_and_the_rest_scanned(tmp_path: Path) -> None:
    """A Helm template in the tree: scan, dry-run and convert report it, go on with the rest,
    and exit 3 (not everything could be read)."""
    tree = tmp_path / "tree"
    (tree / "chart" / "templates").mkdir(parents=True)
    (tree / "chart" / "templates" / "pod.yaml").write_text(HELM_TEMPLATE)
    (tree / "pod.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: ok}\nspec:\n  containers:\n"
        "  - name: c\n    image: i\n    resources: {limits: {nvidia.com/gpu: 1}}\n"
    )
    broken = tree / "chart" / "templates" / "pod.yaml"
    code, out, _ = scan(str(tree), "-o", "json")
    report = json.loads(out)
    assert code == 3
    assert [w["name"] for w in report["workloads"]] == ["ok"]
    [problem] = report["unreadable"]
    assert problem.startswith(f"{broken}: not valid YAML or JSON")
    code, out, err = scan(str(tree))
    assert code == 3 and "1 file(s) could not be read" in out and f"unreadable: {broken}" in err
    dry_out, dry_err = io.StringIO(), io.StringIO()
    code = main(["dry-run", str(tree)], stdin=io.StringIO(), stdout=dry_out, stderr=dry_err)
    assert code == 3 and f"unreadable: {broken}" in dry_err.getvalue()
    assert "resourceClaimTemplateName" in dry_out.getvalue()
    convert_out, convert_err = io.StringIO(), io.StringIO()
    code = main(
        ["convert", str(tree), "--out", str(tmp_path / "out")],
        stdin=io.StringIO(),
        stdout=convert_out,
        stderr=convert_err,
    )
    assert code == 3 and f"unreadable: {broken}" in convert_err.getvalue()
    assert (tmp_path / "out" / "pod.yaml").is_file()


@pytest.mark.plane
def test_cluster_scan_reads_a_page_at_a_time(kube: Cluster) -> None:
    """Lists go page by page (`limit`, `continue`) and only what a report needs outlives its
    page: here 2 items a page over 7 GPU pods, 5 pods without GPUs and 3 pods of one foreign
    controller (one row), against the real kube-apiserver."""
    from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
    from hami_dra_webhook.core.vendors.families import uses_legacy
    from hami_dra_webhook.migrate.sources import from_cluster
    from tests.support.cluster import api_for
    from tests.support.loop import run

    namespace = kube.create_namespace("pages")
    gpu = {"nvidia.com/gpu": "1"}
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}}
    kube.apply(owner, namespace=namespace)
    owner_uid = kube.get("configmap", "owner", "-n", namespace)["metadata"]["uid"]
    pods = [_workload("Pod", f"gpu-{index}", gpu) for index in range(7)]
    pods += [_workload("Pod", f"plain-{index}", {"cpu": "1"}) for index in range(5)]
    for index in range(3):
        owned = _workload("Pod", f"owned-{index}", gpu)
        owned["metadata"]["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner_uid,
             "controller": True}
        ]  # fmt: skip
        pods.append(owned)
    kube.apply({"apiVersion": "v1", "kind": "List", "items": pods}, namespace=namespace)

    api = api_for(kube.plane.admin_kubeconfig, page_size=2)
    pages: list[int] = []
    paged = api.workload_pages

    def counted(kind: str, where: str | None, *, timeout: float) -> Any:
        async def pages_of() -> Any:
            async for page in paged(kind, where, timeout=timeout):
                if kind == "Pod":
                    pages.append(len(page))
                yield page

        return pages_of()

    api.workload_pages = counted  # type: ignore[method-assign,assignment]
    try:
        found = run(
            from_cluster(
                api, namespace, lambda _: None, lambda pod: uses_legacy(pod, DEFAULT_POLICY)
            )
        )
    finally:
        run(api.close())
    assert pages and max(pages) <= 2 and sum(pages) == 15, pages
    assert sorted(w.name for w in found) == [*(f"gpu-{index}" for index in range(7)), "owner"]
    assert all("status" not in w.pod for w in found)


def test_an_sm_limit_is_said_of_what_the_node_monitor_keeps() -> None:
    """gpucores strictly between 0 and 100: a note (no attention: the pod converts) naming
    what HAMi's feedback loop did with the limit and what it does on a DRA node."""

    def pod(name: str, cores: object) -> str:
        return json.dumps({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {
                "nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000, "nvidia.com/gpucores": cores,
            }}}]},
        })  # fmt: skip

    documents = "\n---\n".join([pod("limited", 30), pod("whole", 100), pod("none", 0)])
    code, out, _ = scan("-", "-o", "json", stdin=documents)
    assert code == 1  # gpucores 100 beside part of the memory needs attention (not this note)
    workloads = by_name(json.loads(out))
    (note,) = workloads["limited"]["notes"]
    assert note.startswith('container "c": an SM limit (gpucores 30)')
    assert "reads that switch once, when a CUDA process starts" in note
    assert workloads["limited"]["outcome"] == "converted"
    assert workloads["whole"]["notes"] == [] and workloads["none"]["notes"] == []
