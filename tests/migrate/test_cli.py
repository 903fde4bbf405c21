"""`hami-dra-webhook dry-run`: formats, exit codes, workload kinds, namespaces, examples."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from hami_dra_webhook.cli.main import main
from tests.support import dra_limits, k8s_schema

ROOT = Path(__file__).parents[2]
EXAMPLES = ROOT / "examples"
CONFIG = EXAMPLES / "device-config.yaml"


def run(args: list[str], stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(args, stdin=io.StringIO(stdin), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def workload(
    kind: str, api: str, template_path: tuple[str, ...], limits: dict[str, Any]
) -> dict[str, Any]:
    pod = {
        "metadata": {"labels": {"app": "x"}},
        "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": limits}}]},
    }
    document: dict[str, Any] = {"apiVersion": api, "kind": kind, "metadata": {"name": "w"}}
    node = document
    for key in template_path[:-1]:
        node = node.setdefault(key, {})
    node[template_path[-1]] = pod
    return document


KINDS = [
    ("Deployment", "apps/v1", ("spec", "template")),
    ("ReplicaSet", "apps/v1", ("spec", "template")),
    ("StatefulSet", "apps/v1", ("spec", "template")),
    ("DaemonSet", "apps/v1", ("spec", "template")),
    ("Job", "batch/v1", ("spec", "template")),
    ("CronJob", "batch/v1", ("spec", "jobTemplate", "spec", "template")),
]


@pytest.mark.parametrize(("kind", "api", "path"), KINDS)
def test_workload_kinds_translate_their_pod_template(
    kind: str, api: str, path: tuple[str, ...]
) -> None:
    document = workload(kind, api, path, {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "2000"})
    code, out, _ = run(["dry-run", "-o", "json", "-"], json.dumps(document))
    assert code == 0
    (item,) = json.loads(out)["items"]
    assert (item["kind"], item["outcome"], item["namespace"], item["name"]) == (
        kind,
        "converted",
        "",  # none given: `kubectl apply -n` decides
        "w",
    )
    assert jsonpatch.apply_patch(document, item["patch"]) == item["object"]
    assert all(op["path"].startswith("/" + "/".join(path) + "/") for op in item["patch"])
    template = item["object"]
    for key in path:
        template = template[key]
    assert template["spec"]["containers"][0]["resources"] == {"claims": [{"name": "c-gpu"}]}
    assert "namespace" not in item["resourceClaimTemplates"][0]["metadata"]


def test_yaml_output_is_objects_then_templates_ready_for_kubectl() -> None:
    stream = "\n---\n".join(
        yaml.safe_dump(
            workload(
                "Deployment",
                "apps/v1",
                ("spec", "template"),
                {"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(m)},
            )
            | {"metadata": {"name": f"d{m}"}}
        )
        for m in (1000, 2000, 1000)
    )
    stream += (
        "\n---\napiVersion: v1\nkind: Service\nmetadata: {name: svc}\nspec: {ports: [{port: 80}]}\n"
    )
    code, out, err = run(["dry-run", "-"], stream)
    assert code == 0, err
    documents = list(yaml.safe_load_all(out))
    assert [d["kind"] for d in documents] == ["Deployment"] * 3 + ["Service"] + [
        "ResourceClaimTemplate"
    ] * 2
    assert "&id" not in out and "*id" not in out, "YAML anchors would confuse readers"
    # Objects without a namespace: templates carry none either, so `kubectl apply -n` keeps them together.
    assert all("namespace" not in d["metadata"] for d in documents[4:])
    assert 'info: Deployment d1000 (<stdin>): container "c": 1 GPU, 1000 MiB' in err


def test_namespace_from_object_then_flag() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
    }
    other = pod | {"metadata": {"name": "q"}}
    _, out, _ = run(
        ["dry-run", "-n", "team", "-o", "json", "-"],
        json.dumps({"apiVersion": "v1", "kind": "List", "items": [pod, other]}),
    )
    items = json.loads(out)["items"]
    assert [i["namespace"] for i in items] == ["ml", "team"]
    # -n: the object without a namespace goes there, and so do its templates.
    assert [i["object"]["metadata"].get("namespace") for i in items] == ["ml", "team"]
    assert [i["resourceClaimTemplates"][0]["metadata"]["namespace"] for i in items] == [
        "ml",
        "team",
    ]


def test_refused_objects_exit_2_and_name_object_and_container() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "big"},
        "spec": {
            "containers": [
                {"name": "trainer", "resources": {"limits": {"nvidia.com/gpumem": "16Gi"}}}
            ]
        },
    }
    code, out, err = run(["dry-run", "-o", "json", "-"], json.dumps(pod))
    assert code == 2
    assert 'refused: Pod big (<stdin>): container "trainer": limits nvidia.com/gpumem=16Gi' in err
    item = json.loads(out)["items"][0]
    assert item["outcome"] == "refused" and item["patch"] == [] and item["object"] == pod


@pytest.mark.parametrize(
    ("args", "stdin", "fragment"),
    [
        (["dry-run", "missing.yaml"], "", "missing.yaml: no such file"),
        (["dry-run", "-"], "a: [", "not valid YAML or JSON"),
        (
            ["dry-run", "--config", "missing-config.yaml", "-"],
            "",
            "missing-config.yaml: cannot read",
        ),
    ],
)
def test_unreadable_input_exits_3(args: list[str], stdin: str, fragment: str) -> None:
    code, _, err = run(args, stdin)
    assert code == 3
    assert fragment in err and "Traceback" not in err


def test_bad_config_exits_3_with_the_key(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("nvidia:\n  defaultGPUNum: many\n")
    code, _, err = run(["dry-run", "--config", str(config), "-"], "")
    assert code == 3 and "nvidia.defaultGPUNum" in err


def test_patch_output_is_one_json_patch_per_object() -> None:
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p{i}"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]},
        }
        for i, limits in enumerate([{"nvidia.com/gpu": "1"}, {"cpu": "1"}])
    ]
    code, out, _ = run(
        ["dry-run", "-o", "patch", "-"],
        json.dumps({"kind": "PodList", "apiVersion": "v1", "items": pods}),
    )
    lines = out.splitlines()
    assert code == 0 and len(lines) == 2
    converted = jsonpatch.apply_patch(pods[0], json.loads(lines[0]))
    assert "limits" not in converted["spec"]["containers"][0]["resources"]
    assert json.loads(lines[1]) == []


def dry_run_examples(*extra: str) -> dict[str, Any]:
    manifests = sorted(str(p) for p in EXAMPLES.glob("*.yaml"))  # not the sample AdmissionReview
    code, out, err = run(["dry-run", "--config", str(CONFIG), "-o", "json", *extra, *manifests])
    assert code == 0, err
    return dict(json.loads(out))


def test_examples_all_convert() -> None:
    items = dry_run_examples()["items"]
    outcomes = {(i["kind"], i["name"]): i["outcome"] for i in items}
    assert outcomes == {
        ("CronJob", "nightly-eval"): "converted",
        ("Deployment", "inference"): "converted",
        ("DeviceClass", "hami-core-gpu.project-hami.io"): "unchanged",
        ("Job", "warm-then-run"): "converted",
        ("Pod", "train-and-eval"): "converted",
        ("Pod", "gpu-pod"): "converted",
        ("StatefulSet", "notebooks"): "converted",
    }


@pytest.mark.skipif(not k8s_schema.available(), reason=k8s_schema.SKIP_REASON)
def test_examples_validate_against_kubernetes() -> None:
    for item in dry_run_examples()["items"]:
        assert k8s_schema.errors(item["object"]) == [], item["name"]
        for template in item["resourceClaimTemplates"]:
            assert k8s_schema.errors(template) == []
            assert dra_limits.template_problems(template) == []


def test_console_script_runs_from_a_shell() -> None:
    script = shutil.which("hami-dra-webhook") or str(
        Path(sys.executable).parent / "hami-dra-webhook"
    )
    run_ = subprocess.run(
        [script, "dry-run", str(EXAMPLES / "pod.yaml")], capture_output=True, text=True, check=False
    )
    assert run_.returncode == 0, run_.stderr
    assert "resourceClaimTemplateName: hami-gpu-" in run_.stdout
    module = subprocess.run(
        [sys.executable, "-m", "hami_dra_webhook", "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert module.stdout.startswith("hami-dra-webhook ")


def test_a_usage_error_has_its_own_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    """64 (EX_USAGE), never 2, which means "something would be refused"."""
    for argv in (["dry-run", "--output", "nope", "-"], ["no-such-command"], ["scan", "--bogus"]):
        assert main(argv) == 64, argv
        assert "error:" in capsys.readouterr().err


def test_filenames_as_kubectl_takes_them(tmp_path: Path) -> None:
    """-f/--filename (repeatable) beside positional paths, in every command reading manifests."""
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    for path, name in ((first, "a"), (second, "b")):
        path.write_text(
            f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers:\n"
            "  - name: c\n    image: i\n    resources: {limits: {nvidia.com/gpu: 1}}\n"
        )
    code, out, _ = run(["dry-run", str(first), "-f", str(second), "-o", "json"])
    assert code == 0 and [i["name"] for i in json.loads(out)["items"]] == ["a", "b"]
    code, out, _ = run(["scan", "-f", str(first), "--filename", str(second), "-o", "json"])
    assert code == 0 and sorted(w["name"] for w in json.loads(out)["workloads"]) == ["a", "b"]
    code, _, err = run(
        ["convert", "-f", str(first), "-f", str(second), "--out", str(tmp_path / "o")]
    )
    assert code == 0, err
    assert (tmp_path / "o" / "a.yaml").is_file() and (tmp_path / "o" / "b.yaml").is_file()


def test_convert_stdin_to_stdout() -> None:
    manifest = (
        "# keep me\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
        "  - name: c\n    image: i\n    resources:\n      limits:\n        nvidia.com/gpu: 1\n"
    )
    code, out, err = run(["convert", "-"], manifest)
    assert code == 0, err
    assert "# keep me\n" in out and "resourceClaimTemplateName" in out
    assert "kind: ResourceClaimTemplate" in out
    code, _, err = run(["convert", "-", "--out", "x"], manifest)
    assert code == 64 and "writes to stdout" in err
    code, _, err = run(["convert", "some.yaml"], manifest)
    assert code == 64 and "--out DIR or --in-place" in err
