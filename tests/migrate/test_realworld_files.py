"""Every document of both real-world corpora (`../shared/realworld/cases`, SOURCES.md, and
`cases2`, SOURCES2.md), under every device config of `configs/` that fits it, through dry-run,
scan and convert: nothing with a legacy (or legacy-looking) resource passes in silence, each
template gets the verdict its pods get at admission, convert writes what dry-run shows, and
converting twice changes nothing."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from hami_dra_webhook.cli.inputs import DEFAULT_EXCLUDED
from hami_dra_webhook.cli.main import main
from hami_dra_webhook.core.settings.policy import policy_from_yaml
from hami_dra_webhook.core.translate.pod import translate_pod
from hami_dra_webhook.core.vendors.families import names_a_family
from hami_dra_webhook.files.embedded import embedded_pods
from hami_dra_webhook.files.manifests import api_group, pod_template, read_manifests
from hami_dra_webhook.migrate.report import worth_reporting
from tests.support.shared import SHARED, shared_path

FOLDERS = ("cases", "cases2")
DEFAULT = "hami-v2.10-chart-default.device-config.yaml"
DAOCLOUD = "daocloud-nvidia-vgpu-2.9.0.device-config.yaml"
VENDORS = "hami-v2.10-chart-default.vendors-converted.device-config.yaml"
ALAUDA = "alauda-gpualloc-inferred.device-config.yaml"
# Domains of the vendors the `vendors` config converts: a file naming one is tried under it too.
VENDOR_DOMAINS = ("hygon.com/", "huawei.com/", "amd.com/", "aws.amazon.com/")
SHORT = {DEFAULT: "default", DAOCLOUD: "daocloud", VENDORS: "vendors", ALAUDA: "alauda"}
EXCLUDED = frozenset(DEFAULT_EXCLUDED.split(","))
Key = tuple[str, str]
QUOTA_KINDS = ("ResourceQuota", "ClusterQueue", "Queue")  # they count resources, hold no pods


def configs_for(name: str, text: str) -> list[str]:
    """The device configs a file fits (SOURCES2.md: `default` for every case, `vendors` for the
    Hygon, Ascend and AMD ones, `alauda` besides for Alauda's; DaoCloud's files were written
    against DaoCloud's)."""
    if name.startswith("DaoCloud__"):
        return [DAOCLOUD]
    fits = [DEFAULT]
    if any(domain in text for domain in VENDOR_DOMAINS):
        fits.append(VENDORS)
    if name.startswith("alauda__"):
        fits.append(ALAUDA)
    return fits


def _params() -> list[Any]:
    # Collected without failing where the corpus is absent: the test then skips or fails.
    found = []
    for folder in FOLDERS:
        where = SHARED / "realworld" / folder
        if not where.is_dir():
            found.append(pytest.param(folder, "(corpus absent)", DEFAULT, id=f"{folder}-absent"))
            continue
        for path in sorted(where.iterdir()):
            for config in configs_for(path.name, path.read_text(encoding="utf-8")):
                short = SHORT[config]
                found.append(pytest.param(folder, path.name, config, id=f"{path.name}-{short}"))
    return found


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdin=io.StringIO(""), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def legacy_resources(node: Any, policy: Any, path: str = "") -> list[str]:
    """Where, in any object, a map of resources names a legacy family (found here by walking
    every map, apart from the product's knowledge of where operators keep containers)."""
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{path}.{key}" if path else str(key)
            if key in ("resources", "resourcesPerNode") and isinstance(value, dict):
                if names_a_family({"resources": value}, policy):
                    found.append(here)
            elif isinstance(value, dict | list):
                found += legacy_resources(value, policy, here)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += legacy_resources(value, policy, f"{path}[{index}]")
    return found


def admitted(document: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any]:
    """The pod a template's controller creates, as far as admission reads it, written here
    apart from the product: a Volcano Job's pods take the Job's schedulerName (volcano when it
    names none) where the template names none (its job controller's createJobPod)."""
    spec = pod.get("spec") or {}
    if (api_group(document), document.get("kind")) != ("batch.volcano.sh", "Job"):
        return pod
    if spec.get("schedulerName"):
        return pod
    scheduler = (document.get("spec") or {}).get("schedulerName") or "volcano"
    return {**pod, "spec": {**spec, "schedulerName": scheduler}}


def expected(manifests: list[Any], policy: Any) -> tuple[list[Key], dict[Key, str]]:
    """(kind/name, where) of each template worth a word, and the outcome its pods get at
    admission."""
    reported: list[Key] = []
    verdicts: dict[Key, str] = {}
    for manifest in manifests:
        document = manifest.document
        if not isinstance(document, dict):
            continue
        metadata = document.get("metadata") or {}
        title = f"{document.get('kind')}/{metadata.get('name') or metadata.get('generateName')}"
        namespace = metadata.get("namespace")
        found = pod_template(document)
        templates = [("", found[1])] if found is not None else []
        templates += [(e.where, e.pod) for e in embedded_pods(document)]
        if str(document.get("kind")) not in QUOTA_KINDS:
            places = [w for w, pod in templates if worth_reporting(pod, policy)]
            for place in legacy_resources(document, policy):
                assert any(place.startswith(w) for w in places), (title, place, places)
        for where, pod in templates:
            if not worth_reporting(pod, policy):
                continue
            reported.append((title, where))
            if namespace in EXCLUDED:
                verdicts[(title, where)] = "unchanged"
            else:
                decision = translate_pod(admitted(document, pod), policy, namespace)
                verdicts[(title, where)] = decision.outcome
    return reported, verdicts


@pytest.mark.parametrize(("folder", "name", "config"), _params())
def test_every_file_under_every_config(folder: str, name: str, config: str, tmp_path: Path) -> None:
    path = shared_path("realworld", folder, name, what="the real-world corpus")
    config_path = str(shared_path("realworld", "configs", config, what="the corpus's configs"))
    policy = policy_from_yaml(Path(config_path).read_text()).policy
    read = read_manifests([str(path)], io.StringIO(""))
    assert read.unreadable == []
    reported, verdicts = expected(read.manifests, policy)

    code, out, err = run("dry-run", "--config", config_path, "-o", "json", str(path))
    assert code in (0, 2) and "Traceback" not in err, err
    report = json.loads(out)
    said: dict[tuple[str, str], str] = {}
    for entry in report["items"]:
        title = f"{entry['kind']}/{entry['name']}"
        assert entry["source"].startswith(str(path)), entry["source"]
        if entry["outcome"] != "unchanged" or entry["warnings"]:
            said[(title, "")] = entry["outcome"]
        for inside in entry["embedded"]:
            assert inside["outcome"] != "unchanged" or inside["warnings"], (title, inside)
            said[(title, inside["path"])] = inside["outcome"]
    # Nothing passes in silence, and each template has the verdict of its pods at admission.
    missing = [key for key in reported if key not in said]
    assert missing == [], (missing, said)
    assert {key: said[key] for key in reported} == verdicts
    assert code == (2 if "refused" in verdicts.values() else 0), err

    code, out, err = run("scan", "--config", config_path, "-o", "json", str(path))
    assert code in (0, 1, 2) and "Traceback" not in err, err
    scanned = json.loads(out)["workloads"]
    assert sorted((f"{w['kind']}/{w['name']}", w["embedded_at"]) for w in scanned) == sorted(
        reported
    )
    assert all(w["source"].startswith(str(path)) for w in scanned)

    out_dir = tmp_path / "out"
    code, _, err = run("convert", "--config", config_path, "--out", str(out_dir), str(path))
    assert code in (0, 2) and "Traceback" not in err and "unreadable" not in err, err
    written = (out_dir / path.name).read_text(encoding="utf-8")
    # Every output reads as YAML; what convert wrote is what dry-run shows, object for object
    # (quotas included), its templates after them.
    objects = [i["object"] for i in report["items"]]
    documents = [d for d in yaml.safe_load_all(written) if d is not None]
    assert documents[: len(objects)] == objects
    templates = [t for i in report["items"] for t in i["resourceClaimTemplates"]]
    assert {d["metadata"]["name"] for d in documents[len(objects) :]} == {
        t["metadata"]["name"] for t in templates
    }
    again = tmp_path / "again"
    code, _, err = run(
        "convert", "--config", config_path, "--out", str(again), str(out_dir / path.name)
    )
    assert (again / path.name).read_text(encoding="utf-8") == written, err
