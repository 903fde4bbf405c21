"""The chart's alerts and dashboard against real series: Debian's Prometheus scrapes a running
webhook (connected to the shared real control plane, so that the template watch, the cluster
check and the driver's published GPUs have series) and a node monitor (a converted pod's claim
on the plane's GPU node, its region written as libvgpu.so writes it), loads the rules the chart
renders, and answers every alert expression and dashboard query without an error, over the
webhook's and the monitor's own metric names; HAMi's own dashboard queries for containers
answer for the converted pod. Then the webhook is stopped, and HamiDraWebhookDown turns
pending."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.monitor.cluster_pods import claim, gpu_pod
from tests.monitor.conftest import claim_region
from tests.monitor.monitor_process import MonitorProcess
from tests.ops.test_alerts import alerts, dashboard_queries, rules
from tests.support.cluster import Cluster, wait_for
from tests.support.reviews import replica_pod, review
from tests.support.webhook_process import Webhook, free_port

pytestmark = pytest.mark.plane  # the shared control plane (tests/conftest.py)

JOB, NAMESPACE = "hami-dra-webhook", "hami-system"  # as the chart's ServiceMonitor labels them
MONITOR_JOB = "hami-dra-webhook-monitor"  # the monitor's ServiceMonitor (honorLabels)
Mi = 1024 * 1024


class Prometheus:
    def __init__(self, folder: Path, target: str, monitor: str) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            pytest.fail("prometheus is not installed: ./scripts/test installs Debian's")
        (folder / "rules.yaml").write_text(yaml.safe_dump(rules()))
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": ["rules.yaml"],
            "scrape_configs": [
                {
                    "job_name": JOB,
                    "static_configs": [{"targets": [target], "labels": {"namespace": NAMESPACE}}],
                },
                {
                    "job_name": MONITOR_JOB,
                    "honor_labels": True,
                    "static_configs": [{"targets": [monitor], "labels": {"namespace": NAMESPACE}}],
                },
            ],
        }
        (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.port = free_port()
        self.log = (folder / "prometheus.log").open("wb")
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={folder / 'prometheus.yml'}",
                f"--storage.tsdb.path={folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--web.enable-lifecycle",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        wait_for(self.ready, "Prometheus to be ready", timeout=60)

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2):
                return True
        except OSError:
            return False

    def api(self, path: str, **query: str) -> Any:
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?{urllib.parse.urlencode(query)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                document = json.load(answer)
        except urllib.error.HTTPError as error:  # 400/422: the query is wrong
            document = json.load(error)
        return document

    def query(self, expression: str) -> list[dict[str, Any]]:
        answer = self.api("query", query=expression)
        assert answer["status"] == "success", (expression, answer)
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        self.log.close()


@dataclass
class Scraped:
    webhook: Webhook
    monitor: MonitorProcess
    prometheus: Prometheus
    pod_namespace: str  # the converted pod's, whose claim's region the monitor reads


@pytest.fixture
def scraped(
    kube: Cluster, tmp_path: Path, device_class: str, gpu_namespace: str
) -> Iterator[Scraped]:
    kubeconfig = str(kube.plane.admin_kubeconfig)
    pod_namespace = gpu_namespace
    card = kube.node.gpus[0]
    claim(kube, pod_namespace, "trainer", card.uuid)
    claim_uid = gpu_pod(kube, pod_namespace, "trainer", "trainer", ("main",))
    root = tmp_path / "claims"
    claim_region(root, claim_uid, card.uuid, pid=os.getpid(), hostpid=os.getpid())
    webhook = Webhook(tmp_path / "webhook", "--kubeconfig", kubeconfig, "--gc-interval", "0")
    monitor = MonitorProcess(
        tmp_path, root, "--kubeconfig", kubeconfig, "--node-name", kube.node.name
    )
    prometheus = Prometheus(tmp_path, f"127.0.0.1:{webhook.ops_port}", f"127.0.0.1:{monitor.port}")
    try:
        yield Scraped(webhook, monitor, prometheus, pod_namespace)
    finally:
        prometheus.stop()
        monitor.stop()
        webhook.stop()


def _hamis_own_dashboard_answers(prometheus: Prometheus, namespace: str) -> None:
    """The container panels of HAMi's own dashboard (dashboards/hami-vgpu-dashboard.json at
    HAMi's main: the queries below, with its $namespace variable set), over the converted
    pod's series: each answers with the pod, as for a legacy HAMi pod."""
    wanted = {"namespace": namespace, "pod": "trainer", "container": "main"}
    answers = {
        f'hami_vgpu_memory_used_bytes{{namespace=~"{namespace}"}}': 544 * Mi,
        f'hami_vgpu_memory_limit_bytes{{namespace=~"{namespace}"}}': 1024 * Mi,
        f'hami_container_device_utilization_ratio{{namespace=~"{namespace}"}}': 37,
        f'100 * hami_vgpu_memory_used_bytes{{namespace=~"{namespace}"}}'
        f' / hami_vgpu_memory_limit_bytes{{namespace=~"{namespace}"}}': 53.125,
        f'topk(10, hami_vgpu_memory_used_bytes{{namespace=~"{namespace}"}})': 544 * Mi,
    }
    for query, value in answers.items():
        (answer,) = prometheus.query(query)
        labels = answer["metric"]
        assert {k: labels.get(k) for k in wanted} == wanted, (query, labels)
        assert labels["vdevice_index"] == "0" and labels["device_uuid"].startswith("GPU-")
        assert float(answer["value"][1]) == value, (query, answer)
    values = prometheus.api("label/namespace/values", **{"match[]": "hami_vgpu_memory_used_bytes"})
    assert namespace in values["data"]  # the dashboard's $namespace variable


def _names(expression: str) -> set[str]:
    """The metric names an expression reads."""
    words = set(re.findall(r"\b([a-z_][a-z0-9_]*)\s*\{", expression))
    return {w for w in words if w == "up" or w.startswith(("hami_", "process_"))}


def _series_names(exposition: str) -> set[str]:
    """The series names each `# TYPE` line of an exposition declares."""
    suffixes = {
        "counter": ("_total",),
        "histogram": ("_bucket", "_sum", "_count"),
        "gauge": ("",),
        "summary": ("", "_sum", "_count"),
    }
    names = set()
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", exposition, re.M):
        base = name.removesuffix("_total") if kind == "counter" else name
        names |= {base + suffix for suffix in suffixes.get(kind, ("",))}
    return names


def test_alerts_and_dashboard_evaluate_over_the_webhooks_real_series(
    scraped: Scraped, kube: Cluster
) -> None:
    webhook, prometheus = scraped.webhook, scraped.prometheus
    namespace = kube.create_namespace("prom")
    for _ in range(3):  # a conversion, so that latency and admission series exist
        assert webhook.post(review(replica_pod(), namespace=namespace))[0] == 200
    selector = f'job="{JOB}", namespace="{NAMESPACE}"'
    wait_for(
        lambda: prometheus.query(f"hami_dra_admissions_total{{{selector}}}"),
        "the admissions to be scraped",
        timeout=60,
    )
    wait_for(
        lambda: prometheus.query(f"hami_dra_driver_gpus{{{selector}}} > 0"),
        "the cluster check's driver series",
        timeout=60,
    )
    wait_for(
        lambda: prometheus.query(f'hami_vgpu_memory_used_bytes{{job="{MONITOR_JOB}"}}'),
        "the node monitor's series of the converted pod",
        timeout=60,
    )
    exported = {
        s["metric"]["__name__"] for s in prometheus.query(f'{{{selector}, __name__=~".+"}}')
    } | {s["metric"]["__name__"] for s in prometheus.query(f'{{job="{MONITOR_JOB}"}}')}
    for alert in alerts():
        prometheus.query(alert["expr"])  # evaluates, with no error
        missing = _names(alert["expr"]) - exported - {"hami_dra_admission_duration_seconds_bucket"}
        assert not missing, (alert["alert"], missing)
    assert "hami_dra_admission_duration_seconds_bucket" in exported
    # The dashboard may show series that appear with their first event (an API error by code):
    # its names must be the webhook's families, as /metrics declares them.
    _, text = webhook.get_ops("/metrics")
    declared = {"up"} | _series_names(text.decode()) | _series_names(scraped.monitor.scrape_text())
    for expression in dashboard_queries():
        concrete = (
            expression.replace("$monitor_job", MONITOR_JOB)
            .replace("$pod_namespace", scraped.pod_namespace)
            .replace("$job", JOB)
            .replace("$namespace", NAMESPACE)
        )
        prometheus.query(concrete)
        assert _names(concrete) <= declared, concrete
    _hamis_own_dashboard_answers(prometheus, scraped.pod_namespace)

    # Healthy: every rule evaluates, and none is pending or firing once the first scrapes are
    # in (before them, HamiDraWebhookDown is rightly pending: no target was up yet).
    def states() -> dict[str, tuple[str, str]]:
        groups = prometheus.api("rules")["data"]["groups"]
        return {r["name"]: (r["health"], r["state"]) for g in groups for r in g["rules"]}

    wait_for(
        lambda: set(states().values()) == {("ok", "inactive")},
        "every rule healthy and inactive",
        timeout=30,
    )
    assert len(states()) == len(alerts())
    ready = prometheus.query(f"hami_dra_ready{{{selector}}}")
    assert [s["value"][1] for s in ready] == ["1"]

    webhook.stop()
    wait_for(
        lambda: any(
            a["labels"]["alertname"] == "HamiDraWebhookDown" and a["state"] == "pending"
            for a in prometheus.api("alerts")["data"]["alerts"]
        ),
        "HamiDraWebhookDown to turn pending once the webhook is gone",
        timeout=60,
    )
    kube.release_namespace(namespace)
