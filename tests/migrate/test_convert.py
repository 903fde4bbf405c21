"""`convert`: rewritten sources keep comments and key order; twice changes nothing."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
import yaml

from hami_dra_webhook.cli.main import main
from tests.support import k8s_schema

TREE = Path(__file__).parents[1] / "manifests"


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), stdin=io.StringIO(""), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_convert_keeps_comments_and_order_and_adds_templates(tmp_path: Path) -> None:
    code, out, err = run("convert", str(TREE), "--out", str(tmp_path / "out"))
    assert code == 2 and "refused: " in err and "big-memory" in err
    text = (tmp_path / "out" / "team-a" / "apps.yaml").read_text()
    assert "# Team A's inference services (legacy HAMi requests, unchanged)." in text
    assert "name: triton   # converts" in text and 'cpu: "4"               # stays' in text
    assert "nvidia.com/gpu" not in text.split("kind: StatefulSet")[0]
    documents = list(yaml.safe_load_all(text))
    assert [d["kind"] for d in documents] == [
        "Deployment",
        "StatefulSet",
        "Service",
        "ResourceClaimTemplate",
    ]
    deployment = documents[0]
    assert list(deployment) == ["apiVersion", "kind", "metadata", "spec"]
    claim = deployment["spec"]["template"]["spec"]["resourceClaims"][0]
    assert claim["resourceClaimTemplateName"] == documents[3]["metadata"]["name"]
    assert documents[3]["metadata"]["namespace"] == "team-a"
    # The refused pod stays as it was; the file still gets its convertible neighbour converted.
    broken = list(yaml.safe_load_all((tmp_path / "out" / "team-b" / "broken.yaml").read_text()))
    assert broken[0]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem"] == "16Gi"
    assert "claims" in broken[1]["spec"]["containers"][0]["resources"]
    assert "team-a/apps.yaml: Deployment/triton" in out.replace(str(tmp_path / "out") + "/", "")
    if k8s_schema.available():
        for path in (tmp_path / "out").rglob("*.yaml"):
            for document in yaml.safe_load_all(path.read_text()):
                assert k8s_schema.object_errors(document) == [], path


def test_convert_twice_changes_nothing_and_dry_run_says_unchanged(tmp_path: Path) -> None:
    run("convert", str(TREE), "--out", str(tmp_path / "once"))
    run("convert", str(tmp_path / "once"), "--out", str(tmp_path / "twice"))
    for first in (tmp_path / "once").rglob("*.*"):
        assert (
            first.read_bytes()
            == (tmp_path / "twice" / first.relative_to(tmp_path / "once")).read_bytes()
        )
    _, out, _ = run("dry-run", "-o", "json", str(tmp_path / "once"))
    outcomes = {(i["kind"], i["name"]): i["outcome"] for i in json.loads(out)["items"]}
    assert outcomes[("Deployment", "triton")] == "unchanged"
    # Left as they were and still refused: a gpumem with a suffix; a percentage without sizes.
    assert outcomes[("Pod", "big-memory")] == outcomes[("StatefulSet", "notebooks")] == "refused"
    assert {o for k, o in outcomes.items() if k[1] not in ("big-memory", "notebooks")} == {
        "unchanged"
    }


def test_in_place_and_json_files(tmp_path: Path) -> None:
    work = tmp_path / "work"
    shutil.copytree(TREE / "team-b", work)
    untouched = (work / "broken.yaml").read_text()
    code, _, _ = run("convert", str(work / "list.json"), "--in-place")
    assert code == 0
    converted = json.loads((work / "list.json").read_text())
    assert converted["kind"] == "List" and [i["kind"] for i in converted["items"]] == [
        "DaemonSet",
        "ResourceClaimTemplate",
    ]
    daemonset = converted["items"][0]
    assert daemonset["spec"]["template"]["spec"]["containers"][0]["resources"] == {
        "claims": [{"name": "probe-gpu"}]
    }
    assert (work / "broken.yaml").read_text() == untouched
    assert run("convert", str(work / "missing.yaml"), "--in-place")[0] == 3


def test_files_of_the_same_name_keep_their_folders(tmp_path: Path) -> None:
    """`convert A/deployment.yaml B/deployment.yaml --out X`: two outputs, never one."""
    source = (TREE / "team-a" / "apps.yaml").read_text()
    for folder in ("A", "B"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "deployment.yaml").write_text(source)
    out = tmp_path / "X"
    a, b = tmp_path / "A" / "deployment.yaml", tmp_path / "B" / "deployment.yaml"
    code, _, err = run("convert", str(a), str(b), "--out", str(out))
    assert code in (0, 2), err
    assert (out / "A" / "deployment.yaml").is_file() and (out / "B" / "deployment.yaml").is_file()
    assert (out / "A" / "deployment.yaml").read_text() == (
        out / "B" / "deployment.yaml"
    ).read_text()


def test_the_same_file_twice_or_out_onto_an_input_is_an_error(tmp_path: Path) -> None:
    manifest = tmp_path / "f.yaml"
    manifest.write_text((TREE / "team-a" / "apps.yaml").read_text())
    before = manifest.read_text()
    code, out, err = run("convert", str(manifest), "--out", str(manifest))
    assert code == 64 and out == ""
    assert err == f"error: --out {manifest} is a file; give a folder (or use --in-place)\n"
    code, _, err = run("convert", str(manifest), "--out", str(tmp_path))
    assert code == 64 and "would overwrite the input" in err
    code, _, err = run("convert", str(manifest), str(manifest), "--out", str(tmp_path / "o"))
    assert code == 64 and "would both be written to" in err
    assert manifest.read_text() == before and not (tmp_path / "o").exists()


def test_edited_text_equals_the_round_trip(monkeypatch: pytest.MonkeyPatch) -> None:
    """Converted documents are edited in place (libyaml positions) where they are block style;
    the result reads back exactly as the ruamel round trip's, and keeps every comment line."""
    from hami_dra_webhook.admission.admitted import AdmissionRules
    from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
    from hami_dra_webhook.migrate import convert

    for path in sorted(TREE.rglob("*.yaml")):
        text = path.read_text()
        fast = convert.convert_text(text, AdmissionRules(DEFAULT_POLICY), None, False)
        with monkeypatch.context() as patched:
            patched.setattr(convert, "edited_text", lambda *args: None)
            slow = convert.convert_text(text, AdmissionRules(DEFAULT_POLICY), None, False)
        assert list(yaml.safe_load_all(fast.text)) == list(yaml.safe_load_all(slow.text)), path
        kept = [line for line in text.splitlines() if line.strip().startswith("#")]
        assert all(line in fast.text for line in kept), path


@pytest.mark.parametrize(
    "pod",
    [
        # flow style where the patch goes: the round trip takes over
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {app: x}}\nspec:\n  containers:\n"
        "  - name: c\n    image: i\n    resources: {limits: {nvidia.com/gpu: 1}}\n",
        # the first key of a sequence item is the one removed
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n"
        "  - resources:\n      limits:\n        nvidia.com/gpu: 1\n    name: c\n    image: i\n",
        # anchors
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: &l {app: x}\n"
        "  annotations: *l\nspec:\n  containers:\n  - name: c\n    image: i\n"
        "    resources:\n      limits:\n        nvidia.com/gpu: 1\n",
    ],
)
def test_what_cannot_be_edited_in_place_is_still_converted(pod: str) -> None:
    from hami_dra_webhook.admission.admitted import AdmissionRules
    from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
    from hami_dra_webhook.migrate.convert import convert_text

    result = convert_text(pod, AdmissionRules(DEFAULT_POLICY), None, False)
    converted, template = list(yaml.safe_load_all(result.text))
    assert converted["spec"]["containers"][0]["resources"] == {"claims": [{"name": "c-gpu"}]}
    assert template["kind"] == "ResourceClaimTemplate"


def test_alike_workloads_are_converted_alike_by_either_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Workloads of one kind share one cached decision: applying it to one document (in place,
    or by the round trip, which puts the patch's values in by reference) must leave it as it
    was for the next. Three alike Deployments of two GPU containers each, in block and flow
    style, converted together, each read back as when converted alone."""
    from hami_dra_webhook.admission.admitted import AdmissionRules
    from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
    from hami_dra_webhook.migrate import convert

    containers = "".join(
        f"      - name: c{i}\n        image: i\n"
        f"        resources: {{limits: {{nvidia.com/gpu: 1, nvidia.com/gpumem: 2000}}}}\n"
        for i in range(2)
    )
    deployment = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: d{n}}}\nspec:\n"
        "  selector: {{matchLabels: {{app: x}}}}\n  template:\n"
        "    metadata: {{labels: {{app: x}}}}\n    spec:\n      containers:\n"
    )
    documents = [deployment.format(n=n) + containers for n in range(3)]
    for edited in (True, False):
        with monkeypatch.context() as patched:
            if not edited:
                patched.setattr(convert, "edited_text", lambda *args: None)
            together = convert.convert_text(
                "---\n".join(documents), AdmissionRules(DEFAULT_POLICY), None, False
            )
            alone = [
                convert.convert_text(d, AdmissionRules(DEFAULT_POLICY), None, False)
                for d in documents
            ]
        read = list(yaml.safe_load_all(together.text))
        expected = [next(yaml.safe_load_all(result.text)) for result in alone]
        assert read[:3] == expected and len(together.templates) == 1, together.text
