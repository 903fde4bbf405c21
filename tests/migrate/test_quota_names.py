"""Quota judgements follow the names the policy converts (issue 49, class 2): every quota rule
goes through `core.quota.gpu_quota.counts_converted`. Under a renamed count resource
(`nvidia.com/gpualloc`), `nvidia.com/gpu` belongs to NVIDIA's own device plugin, whose pods are
never converted: a quota or ClusterQueue on it is not affected, so no row, no warning, exit 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hami_dra_webhook.core.quota.gpu_quota import counts_converted
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY, policy_from_yaml
from tests.migrate.test_scan import scan

RENAMED = "nvidia:\n  resourceCountName: nvidia.com/gpualloc\n"


def quota(key: str) -> str:
    return (
        "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q, namespace: team-a}\n"
        f"spec: {{hard: {{{key}: '4'}}}}\n"
    )


def cluster_queue(name: str) -> str:
    return (
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: cq}\n"
        "spec:\n  resourceGroups:\n  - coveredResources: [" + name + "]\n"
        "    flavors:\n    - name: default\n      resources:\n"
        f"      - {{name: {name}, nominalQuota: 8}}\n"
    )


def test_the_one_rule_knows_only_the_converted_names() -> None:
    renamed = policy_from_yaml(RENAMED).policy
    assert counts_converted("requests.nvidia.com/gpu", DEFAULT_POLICY)
    assert counts_converted("limits.nvidia.com/gpumem", DEFAULT_POLICY)
    assert not counts_converted("requests.nvidia.com/gpu", renamed)
    assert counts_converted("requests.nvidia.com/gpualloc", renamed)
    assert counts_converted("nvidia.com/gpumem", renamed)  # not renamed: still converted
    assert not counts_converted("requests.nvidia.com/mig-1g.5gb", DEFAULT_POLICY)
    assert not counts_converted("requests.cpu", DEFAULT_POLICY)
    assert counts_converted("nvidia.com/total-gpumem", DEFAULT_POLICY)  # Kueue's HAMi total
    assert not counts_converted("nvidia.com/total-gpualloc", DEFAULT_POLICY)
    assert not counts_converted(7, DEFAULT_POLICY)


@pytest.mark.parametrize(
    "document", [quota("requests.nvidia.com/gpu"), cluster_queue("nvidia.com/gpu")]
)
def test_a_quota_on_a_name_not_converted_is_left_alone(tmp_path: Path, document: str) -> None:
    config, manifest = tmp_path / "config.yaml", tmp_path / "q.yaml"
    config.write_text(RENAMED)
    manifest.write_text(document)
    code, out, err = scan(str(manifest), "--config", str(config), "-o", "json")
    assert (code, json.loads(out)["quotas"]) == (0, []), err
    renamed = document.replace("nvidia.com/gpu", "nvidia.com/gpualloc")
    manifest.write_text(renamed)
    code, out, _ = scan(str(manifest), "--config", str(config), "-o", "json")
    (row,) = json.loads(out)["quotas"]
    assert code == 1 and row["counts"][0].endswith("nvidia.com/gpualloc")
    manifest.write_text(document)
    code, out, _ = scan(str(manifest), "-o", "json")  # the default names: affected
    assert code == 1 and len(json.loads(out)["quotas"]) == 1
