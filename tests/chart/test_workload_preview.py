"""The chart's ValidatingWebhookConfiguration of the workloads' preview: it never denies
(failurePolicy Ignore, sideEffects None), it is sent only workloads whose pod template names a
legacy GPU resource and only by people (not the controllers that write ReplicaSets and Jobs),
and it follows the pod webhook's namespace scope. The expressions run here with cel-python; the
real kube-apiserver runs them in tests/node/test_chart_on_node.py."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.chart.test_chart import CHART, _match_request, find, render
from tests.support.chart_tools import run_helm

GPU = {"name": "c", "resources": {"limits": {"nvidia.com/gpumem": "4000"}}}
CPU = {"name": "c", "resources": {"limits": {"cpu": "1"}}}
PERSON = {"operation": "CREATE", "userInfo": {"username": "alice"}}


def _deployment(*containers: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "Deployment", "spec": {"template": {"spec": {"containers": list(containers)}}}}


def _cron_job(*containers: dict[str, Any]) -> dict[str, Any]:
    pod = {"spec": {"containers": list(containers)}}
    return {"kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": pod}}}}


def _preview(documents: list[dict[str, Any]]) -> dict[str, Any]:
    return find(documents, "ValidatingWebhookConfiguration")


def _sent(webhook: dict[str, Any], workload: dict[str, Any], request: dict[str, Any]) -> bool:
    return all(
        _match_request(c["expression"], workload, request) for c in webhook["matchConditions"]
    )


def test_it_never_denies_and_calls_its_own_path() -> None:
    for webhook in _preview(render())["webhooks"]:
        assert webhook["failurePolicy"] == "Ignore" and webhook["sideEffects"] == "None"
        assert webhook["clientConfig"]["service"]["path"] == "/validate-workloads"
        assert all(rule["operations"] == ["CREATE", "UPDATE"] for rule in webhook["rules"])


@pytest.mark.parametrize(
    ("workload", "request_", "sent"),
    [
        (_deployment(GPU), PERSON, True),
        (_deployment(CPU), PERSON, False),
        (_deployment(CPU, GPU), PERSON, True),
        (_cron_job(GPU), PERSON, True),
        (_cron_job(CPU), PERSON, False),
        (
            {
                "kind": "Deployment",
                "spec": {"template": {"spec": {"containers": [CPU], "initContainers": [GPU]}}},
            },
            PERSON,
            True,
        ),
        (
            _deployment(GPU),
            {
                "operation": "CREATE",
                "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
            },
            False,
        ),
        (
            _deployment(GPU),
            {"operation": "CREATE", "userInfo": {"username": "system:kube-controller-manager"}},
            False,
        ),
        (
            _deployment(GPU),
            {"operation": "UPDATE", "userInfo": {"username": "system:serviceaccount:ci:deployer"}},
            True,
        ),
    ],
)
def test_built_in_workloads_are_sent_when_a_person_asks_for_legacy_gpus(
    workload: dict[str, Any], request_: dict[str, Any], sent: bool
) -> None:
    webhook = _preview(render())["webhooks"][0]
    assert _sent(webhook, workload, request_) is sent


def test_custom_kinds_are_listed_by_version_and_follow_the_namespace_scope() -> None:
    documents = render("migration.scope=namespaces")
    built_in, custom = _preview(documents)["webhooks"]
    groups = {rule["apiGroups"][0]: rule for rule in custom["rules"]}
    assert groups["kubeflow.org"]["apiVersions"] == ["v1", "v2beta1"]
    assert "rayclusters" in groups["ray.io"]["resources"]
    for webhook in (built_in, custom):
        expressions = webhook["namespaceSelector"]["matchExpressions"]
        assert {"key": "hami.io/gpu-migration", "operator": "In", "values": ["dra"]} in expressions
    deployment = find(documents, "Deployment")
    assert (
        "--migration-scope=namespaces"
        in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    )


def test_it_can_be_turned_off() -> None:
    result = run_helm("template", "x", str(CHART), "--set", "workloadPreview.enabled=false")
    kinds = {d["kind"] for d in yaml.safe_load_all(result.stdout) if d}
    assert "ValidatingWebhookConfiguration" not in kinds and "MutatingWebhookConfiguration" in kinds
