"""Chart conventions a platform team expects: the security contexts are values (today's
defaults kept; OpenShift's restricted SCC can unset the IDs), the driver's PriorityClass,
labels on every object, a scrape timeout, Artifact Hub's annotations, and a README generated
from the schema that is current (scripts/chart_readme.py)."""

from __future__ import annotations

import subprocess
import sys

import yaml

from tests.support.chart_tools import CHART, DRIVER, RELEASE, find, render


def test_security_contexts_are_values_with_todays_defaults() -> None:
    spec = find(render(), "Deployment")["spec"]["template"]["spec"]
    assert spec["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "fsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert spec["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }
    openshift = find(
        render(
            "webhook.podSecurityContext.runAsUser=null",
            "webhook.podSecurityContext.runAsGroup=null",
            "webhook.podSecurityContext.fsGroup=null",
        ),
        "Deployment",
    )["spec"]["template"]["spec"]["securityContext"]
    assert openshift == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}


def test_driver_priority_common_labels_and_scrape_timeout() -> None:
    driver = find(render(), "DaemonSet", DRIVER)["spec"]["template"]["spec"]
    assert driver["priorityClassName"] == "system-node-critical"
    driver = find(render("driver.priorityClassName="), "DaemonSet", DRIVER)["spec"]["template"][
        "spec"
    ]
    assert "priorityClassName" not in driver
    documents = render(
        "commonLabels.team=gpu-platform",
        "serviceMonitor.enabled=true",
        "serviceMonitor.scrapeTimeout=5s",
        "prometheusRule.enabled=true",
        "grafanaDashboard.enabled=true",
        "deviceClass.vendors.hygon=true",
    )
    unlabelled = [
        f"{d['kind']}/{d['metadata']['name']}"
        for d in documents
        if d["metadata"].get("labels", {}).get("team") != "gpu-platform"
    ]
    assert unlabelled == []
    monitor = find(documents, "ServiceMonitor", RELEASE)
    assert monitor["spec"]["endpoints"][0]["scrapeTimeout"] == "5s"


def test_chart_yaml_has_artifact_hub_annotations_and_maintainers() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["maintainers"]
    annotations = chart["annotations"]
    assert annotations["artifacthub.io/license"] == "Apache-2.0"
    links = yaml.safe_load(annotations["artifacthub.io/links"])
    assert {link["name"] for link in links} == {"Documentation", "Source"}
    images = yaml.safe_load(annotations["artifacthub.io/images"])
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    driver = values["driver"]["image"]
    assert f"{driver['registry']}/{driver['repository']}:{driver['tag']}" in {
        i["image"] for i in images
    }
    for change in yaml.safe_load(annotations["artifacthub.io/changes"]):
        assert change["kind"] in ("added", "changed", "deprecated", "removed", "fixed", "security")


def test_every_schema_property_is_described_and_the_readme_is_current() -> None:
    done = subprocess.run(
        [sys.executable, "scripts/chart_readme.py", "--check"],
        cwd=CHART.parents[1],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_notes_print_commands_that_run() -> None:
    from tests.support.chart_tools import run_helm

    done = run_helm("install", "x", str(CHART), "--dry-run=client", "-n", "gpu")
    notes = done.stdout.split("NOTES:", 1)[1]
    assert '-l ""' not in notes and "['" not in notes
    assert "--field-selector spec.driver=hami-core-gpu.project-hami.io" in notes
    assert "hami-dra-webhook check -n gpu --release x-hami-dra-webhook" in notes
    assert "pods that name nvidia.com/gpu, nvidia.com/gpumem," in notes
