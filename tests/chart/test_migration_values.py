"""migration.scope in the chart: where the webhook configuration selects pods and where the
driver DaemonSet runs, as core/pools.py reads them back (Scope.of_webhook)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from hami_dra_webhook.core.pools import Scope, label_selector_matches
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
    return any(
        label_selector_matches({"matchExpressions": t["matchExpressions"]}, labels)
        for t in _driver_terms(documents)
    )


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
