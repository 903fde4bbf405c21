"""migration.scope in the chart: where the webhook configuration selects pods and where the
driver DaemonSet runs, as core/migration/pools.py reads them back (Scope.of_webhook)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from hami_dra_webhook.core.migration.pools import Scope
from hami_dra_webhook.core.model.label_selector import node_term_matches
from tests.support.chart_tools import CHART, find, run_helm


def _render(*sets: str) -> list[dict[str, Any]]:
    args = ["template", "x", str(CHART)]
    for item in sets:
        args += ["--set", item]
    result = run_helm(*args)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def _driver_terms(documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    driver = next(
        d
        for d in documents
        if d["kind"] == "DaemonSet" and d["metadata"]["name"].endswith("driver")
    )
    affinity = driver["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    return list(affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"])


def _driver_runs_on(documents: list[dict[str, Any]], labels: dict[str, str]) -> bool:
    return any(node_term_matches(term, labels) for term in _driver_terms(documents))


GPU = {"nvidia.com/gpu.present": "true"}


@pytest.mark.parametrize("scope", ["all", "namespaces", "workloads"])
def test_the_scope_is_written_where_kube_apiserver_and_the_tools_read_it(scope: str) -> None:
    documents = _render(f"migration.scope={scope}")
    webhooks = find(documents, "MutatingWebhookConfiguration")["webhooks"]
    assert Scope.of_webhook(webhooks[0]).mode == scope
    # The ephemeral-containers webhook checks converted pods whatever the scope.
    assert Scope.of_webhook(webhooks[1]).mode == "all"


@pytest.mark.parametrize(
    ("scope", "pool", "runs"),
    [
        ("all", None, True),
        ("all", "dra", True),
        ("all", "legacy", False),
        ("all", "moving", False),
        ("namespaces", None, False),
        ("namespaces", "dra", True),
        ("workloads", "legacy", False),
        ("workloads", "dra", True),
    ],
)
def test_the_driver_runs_only_in_the_dra_pool(scope: str, pool: str | None, runs: bool) -> None:
    labels = GPU | ({"hami.io/gpu-pool": pool} if pool else {})
    assert _driver_runs_on(_render(f"migration.scope={scope}"), labels) is runs


def test_the_pool_joins_every_term_of_a_custom_affinity() -> None:
    documents = _render(
        "driver.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
        ".matchExpressions[0].key=gpu",
        "driver.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
        ".matchExpressions[0].operator=Exists",
        "migration.scope=namespaces",
    )
    assert _driver_runs_on(documents, {"gpu": "x", "hami.io/gpu-pool": "dra"})
    assert not _driver_runs_on(documents, {"gpu": "x"})


def test_an_unknown_scope_is_refused_by_the_schema() -> None:
    result = run_helm("template", "x", str(CHART), "--set", "migration.scope=some")
    assert result.returncode != 0 and "/migration/scope" in result.stderr, result.stderr


def _scope_terms(selector: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        e for e in selector.get("matchExpressions") or [] if e["key"] == "hami.io/gpu-migration"
    ]


@pytest.mark.parametrize("scope", ["all", "namespaces", "workloads"])
def test_every_webhook_applies_the_same_scope(scope: str) -> None:
    """Issue 46, finding 3: the Volcano Job webhook had no scope term. Every webhook that
    converts or previews pods has the pod webhook's namespace term; the `workloads` opt-in is an
    objectSelector on the pod webhook only (a Job's or workload's own labels are not its pods'),
    and the webhook reads it on the templates itself (--migration-scope)."""
    documents = _render(
        f"migration.scope={scope}", "volcano.convertJobs=true", "workloadPreview.enabled=true"
    )
    mutating = {w["name"]: w for w in find(documents, "MutatingWebhookConfiguration")["webhooks"]}
    validating = find(documents, "ValidatingWebhookConfiguration")["webhooks"]
    pods = mutating["hami-dra-webhook.project-hami.io"]
    volcano = mutating["volcano-jobs.hami-dra-webhook.project-hami.io"]
    expected = _scope_terms(pods["namespaceSelector"])
    assert bool(expected) == (scope == "namespaces")
    for webhook in [volcano, *validating]:
        assert _scope_terms(webhook["namespaceSelector"]) == expected, webhook["name"]
        assert not _scope_terms(webhook.get("objectSelector") or {}), webhook["name"]
    assert bool(_scope_terms(pods["objectSelector"])) == (scope == "workloads")
    deployment = next(d for d in documents if d["kind"] == "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--migration-scope={scope}" in args
