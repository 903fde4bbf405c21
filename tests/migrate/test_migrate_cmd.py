"""`migrate status` and `migrate node --dry-run` against the real kube-apiserver (the shared
1.36 control plane: one GPU node published by a stand-in ResourceSlice, no kubelet). What the
inventory reads (nodes, slices, claims, pods a page at a time, namespaces, PodDisruptionBudgets,
the webhook's scope) must be served as the commands ask for it; the moves themselves run on the
real nodes (tests/node/test_staged_migration.py, test_staged_moves.py)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from hami_dra_webhook.cli.main import main
from tests.support.cluster import Cluster

pytestmark = pytest.mark.plane  # the shared control plane (tests/conftest.py)


def migrate(kube: Cluster, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    kubeconfig = str(kube.plane.admin_kubeconfig)
    code = main(["migrate", *args, "--kubeconfig", kubeconfig], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def legacy_pod(name: str, cores: int | None = None) -> dict[str, Any]:
    limits: dict[str, int] = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000}
    if cores is not None:
        limits["nvidia.com/gpucores"] = cores
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "containers": [
                {
                    "name": "cuda",
                    "image": "ubuntu:22.04",
                    "resources": {"limits": limits},
                }
            ]
        },
    }


def test_status_lists_pools_namespaces_and_what_blocks_a_legacy_pod(kube: Cluster) -> None:
    namespace = kube.create_namespace("migrate")
    kube.apply(legacy_pod("trainer", cores=30), namespace=namespace)
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "trainer"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "trainer"}}},
    }
    kube.apply(budget, namespace=namespace)
    try:
        code, out, err = migrate(kube, "status", "-o", "json")
        assert code == 0, err
        status = json.loads(out)
        assert status["scope"] == "all"  # no webhook configuration installed here
        dra = status["pools"]["dra"]
        assert (dra["nodes"], dra["devices"]) == (1, 3), status
        assert dra["memoryMiB"] == (24 + 24 + 80) * 1024, status
        mine = status["namespaces"][namespace]
        assert (mine["inScope"], mine["legacy"], mine["converted"]) == (True, 1, 0)
        # A bare pod: it would convert onto free capacity, but deleting it loses it.
        (trainer,) = mine["legacyPods"]
        assert trainer["blocker"] == "a bare pod: re-create it yourself (deleting it loses it)"
        assert (trainer["pod"], trainer["node"]) == ("trainer", "")
        # gpucores 30: what the SM limit becomes on a DRA node (docs/node-monitor.md)
        assert trainer["note"].startswith('container "cuda": an SM limit (gpucores 30)')
        code, text, _ = migrate(kube, "status", "--scope", "namespaces")
        assert code == 0
        assert f"{namespace}/trainer: namespace not in the scope" in text, text
        assert '    note: container "cuda": an SM limit (gpucores 30)' in text, text
        assert text.splitlines()[0] == "migration scope: namespaces"

        # The legacy pod is not on the node; what is (other tests' pods of this shared cluster)
        # holds the driver's claims, labelled or not: the pods a move to legacy evicts.
        code, out, err = migrate(
            kube, "node", kube.node.name, "--to", "legacy", "--dry-run", "-o", "json"
        )
        result = json.loads(out)
        assert all(s["side"] == "converted" for s in result["plan"]), result
        assert all(s["namespace"] != namespace for s in result["plan"]), result
        assert code == (2 if result["blockers"] else 0), (code, err)
    finally:
        kube.release_namespace(namespace)


def test_usage_and_unknown_nodes_are_named(kube: Cluster) -> None:
    code, _, err = migrate(kube, "node", kube.node.name, "--to", "dra", "--timeout", "soon")
    assert code == 64 and "--timeout: 'soon' is not a duration: write it as 90" in err, err
    code, _, err = migrate(kube, "node", "no-such-node", "--to", "dra", "--dry-run")
    assert code == 3 and err == "error: no node named no-such-node\n", err


def test_wave_plans_the_fleet_from_names_selectors_and_pools(kube: Cluster) -> None:
    """`migrate wave --dry-run`: the nodes a selector or a pool names, the canary alone
    first, and each wave's plan on the cluster as it is now; nothing moves."""
    node = kube.node.name
    by_pool = migrate(kube, "wave", "--to", "legacy", "--pool", "dra", "--dry-run", "-o", "json")
    by_label = migrate(
        kube, "wave", "--to", "legacy", "-l", f"kubernetes.io/hostname={node}", "--dry-run",
        "-o", "json",
    )  # fmt: skip
    for code, out, err in (by_pool, by_label):
        result = json.loads(out)
        assert result["fleet"]["waves"] == [{"nodes": [node], "gpus": 3}], result
        assert result["fleet"]["canary"] == node and result["moved"] is False
        (preview,) = result["previews"]
        assert all(s["node"] == node and s["side"] == "converted" for s in preview), preview
        blocked = any(s["lostOnEviction"] or not s["fits"] or s["allocatedClaims"] for s in preview)
        assert code == (2 if blocked else 0), (code, err)
    assert kube.get("node", node)["spec"].get("unschedulable") is not True
    # Served by the driver but not labelled: a move only labels it (no pod leaves).
    code, text, _ = migrate(kube, "wave", "--to", "dra", node, "--dry-run")
    assert code == 0 and text.splitlines()[1] == f"wave 1 (canary): {node} (3 GPUs)", text


def test_wave_usage_errors_name_what_to_write(kube: Cluster) -> None:
    code, _, err = migrate(kube, "wave", "--to", "dra")
    assert code == 64 and "name the nodes to move" in err, err
    code, _, err = migrate(kube, "wave", "--to", "dra", "x", "--max-unavailable", "0")
    assert code == 64 and "give a number of nodes (3) or of GPUs (16gpus)" in err, err
    code, _, err = migrate(kube, "wave", "--to", "dra", "no-such-node", "--dry-run")
    assert code == 64 and "error: no node named no-such-node" in err, err
