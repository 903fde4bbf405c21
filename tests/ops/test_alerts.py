"""The operations kit in the chart: its PrometheusRule passes `promtool check rules`, its alerts
fire and stay quiet as tests/ops/alerts_test.yaml says (`promtool test rules`), every alert
links a runbook page that exists, and the Grafana dashboard is valid JSON whose queries name
only metrics the webhook exports. promtool is Debian's (package prometheus, which
./scripts/test installs)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.chart_tools import CHART, find, render, run_helm

HERE = Path(__file__).parent
DOCS = Path(__file__).parents[2] / "docs"
RUNBOOKS = DOCS / "runbooks"
BASE = "https://github.com/Project-HAMi/hami-dra-webhook/blob/main/docs/runbooks"


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool is not installed: ./scripts/test installs Debian's prometheus")
    return found


def rules() -> dict[str, Any]:
    """The rule groups of the chart's PrometheusRule, as a Prometheus rule file holds them."""
    documents = render("prometheusRule.enabled=true", "serviceMonitor.enabled=true")
    return {"groups": find(documents, "PrometheusRule")["spec"]["groups"]}


def alerts() -> list[dict[str, Any]]:
    return [rule for group in rules()["groups"] for rule in group["rules"]]


def test_promtool_checks_the_rules(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rules()))
    done = subprocess.run(
        [promtool(), "check", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in done.stdout


def test_promtool_unit_tests_of_each_alert(tmp_path: Path) -> None:
    """alerts_test.yaml: each alert fires when it should and not before (annotations aside:
    the next test holds them)."""
    bare = rules()
    for group in bare["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(bare))
    shutil.copy(HERE / "alerts_test.yaml", tmp_path)
    done = subprocess.run(
        [promtool(), "test", "rules", "alerts_test.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    tested = set(re.findall(r"alertname: (\w+)", (HERE / "alerts_test.yaml").read_text()))
    assert tested == {a["alert"] for a in alerts()}, "every alert has a unit test"


def test_every_alert_links_its_runbook_and_every_runbook_an_alert() -> None:
    names = {a["alert"] for a in alerts()}
    assert len(names) == 15
    for alert in alerts():
        annotations = alert["annotations"]
        assert annotations["summary"] and annotations["description"], alert["alert"]
        assert annotations["runbook_url"] == f"{BASE}/{alert['alert']}.md"
        assert alert["labels"]["severity"] in ("critical", "warning")
    pages = {p.stem for p in RUNBOOKS.glob("*.md") if p.stem != "index"}
    assert pages == names
    for name in names:
        text = (RUNBOOKS / f"{name}.md").read_text()
        assert text.startswith(f"# {name}\n"), name
        for section in ("## Meaning", "## Impact", "## Diagnosis", "## Mitigation"):
            assert section in text, (name, section)


def test_values_tune_the_rules() -> None:
    documents = render(
        "prometheusRule.enabled=true",
        "prometheusRule.latencyP99Seconds=3",
        'prometheusRule.selector=job="gpu-webhook"',
        "prometheusRule.labels.release=kube-prometheus-stack",
    )
    rule = find(documents, "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    text = yaml.safe_dump(rule["spec"])
    assert "> 3" in text and 'job="gpu-webhook"' in text and "hami-system" not in text
    assert not [
        d
        for d in render()
        if d["kind"] in ("PrometheusRule", "ConfigMap") and "dashboard" in d["metadata"]["name"]
    ]


def dashboard() -> dict[str, Any]:
    documents = render("grafanaDashboard.enabled=true")
    config_map = find(documents, "ConfigMap", "hami-dra-webhook-dashboard")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    loaded: dict[str, Any] = json.loads(config_map["data"]["hami-dra-webhook.json"])
    return loaded


def dashboard_queries() -> list[str]:
    return [t["expr"] for panel in dashboard()["panels"] for t in panel["targets"]]


def test_the_dashboard_is_what_the_sidecar_loads() -> None:
    loaded = dashboard()
    assert loaded == json.loads((CHART / "files" / "dashboard.json").read_text())
    assert loaded["uid"] == "hami-dra-webhook"
    variables = {v["name"] for v in loaded["templating"]["list"]}
    assert variables == {"datasource", "namespace", "job", "monitor_job", "pod_namespace"}
    ids = [panel["id"] for panel in loaded["panels"]]
    assert len(ids) == len(set(ids)) >= 12
    for panel in loaded["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}"
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24
    for query in dashboard_queries():
        # the webhook's series, or the node monitor's (whose namespace is the pod's)
        assert 'job=~"$job", namespace=~"$namespace"' in query or 'job=~"$monitor_job"' in query, (
            query
        )


def test_the_rules_refuse_to_render_without_what_they_select() -> None:
    """The rules select `job="<fullname>"`, which only the chart's ServiceMonitor gives the
    series: without it (and without a selector of one's own) HamiDraWebhookDown would fire
    forever, so the chart refuses to render and says what to set."""
    args = ["template", "hami-dra-webhook", str(CHART), "--set", "prometheusRule.enabled=true"]
    refused = run_helm(*args)
    message = refused.stderr
    assert refused.returncode == 1, refused.stdout
    assert "HamiDraWebhookDown would fire forever" in message
    assert "Set serviceMonitor.enabled=true, or prometheusRule.selector" in message
    own = render("prometheusRule.enabled=true", 'prometheusRule.selector=job="gpu-webhook"')
    assert find(own, "PrometheusRule") and not [d for d in own if d["kind"] == "ServiceMonitor"]
