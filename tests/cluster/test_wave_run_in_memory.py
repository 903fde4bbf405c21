"""A `migrate wave` planned by the use case (cluster/moves/wave_case.py: WaveRun.run) on the
in-memory API (tests/support/memory_api.py), as a dry run: what it reads (the driver's slices,
the Nodes, the claims, the pods, the disruption budgets, the installed webhook's scope), the
waves it plans and how it ends. Moves themselves (cordon, evictions, the canary) keep their
tests on the real node (tests/node/test_staged_migration.py, test_staged_moves.py)."""

from __future__ import annotations

from hami_dra_webhook.cluster.moves.wave_case import Ending, WaveRequest, WaveRun
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from hami_dra_webhook.kube.port import paths
from tests.core.migration.test_pools import legacy_pod, node, resource_slice
from tests.support.loop import run
from tests.support.memory_api import MemoryApi
from tests.support.told import Told


def _cluster() -> MemoryApi:
    api = MemoryApi()
    api.namespaces("team", "hami-system")
    for made in (node("l-1", slots=10, pool="legacy"), node("l-2", slots=10, pool="legacy"),
                 node("d-1", pool="dra")):  # fmt: skip
        api.put(paths.NODES, made)
    api.put(
        paths.RESOURCE_SLICES,
        {**resource_slice("d-1", "24Gi", "24Gi"), "metadata": {"name": "d-1"}},
    )
    owned = legacy_pod("share", "l-1", **{"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000})
    bare = legacy_pod("bare", "l-2")
    bare["metadata"]["name"], bare["metadata"]["ownerReferences"] = "bare", []
    for pod in (owned, bare):
        api.put(paths.pods("team"), {"apiVersion": "v1", "kind": "Pod", **pod})
    return api


def _dry_run(api: MemoryApi, *nodes: str) -> tuple[Ending, Told, WaveRun]:
    screen = Told()
    wave = WaveRun(WaveRequest(to="dra", nodes=nodes, dry_run=True, with_canary=False))
    ending = run(wave.run(api, DEFAULT_POLICY, screen))  # type: ignore[arg-type]
    return ending, screen, wave


def test_a_dry_run_plans_the_wave_on_the_cluster_as_it_is() -> None:
    api = _cluster()
    ending, screen, wave = _dry_run(api, "l-1")
    assert ending is Ending.PLANNED and wave.move is None
    ((read, said),) = screen.plans
    assert said is Ending.PLANNED and read.fleet.waves == [["l-1"]]
    (step,) = read.plans[0]
    assert (step.name, step.goes, step.blocks) == ("share", "converted onto DRA node d-1", False)
    assert read.inventory.scope.mode == "all"  # no webhook installed: every pod
    assert "evict" not in api.calls and "patch_node" not in api.calls  # nothing written


def test_a_pod_no_controller_makes_again_refuses_the_wave() -> None:
    ending, screen, _ = _dry_run(_cluster(), "l-2")
    assert ending is Ending.REFUSED
    ((read, _),) = screen.plans
    (step,) = read.plans[0]
    assert step.name == "bare" and step.lost and step.blocks


def test_a_node_that_is_not_there_is_a_bad_selection() -> None:
    ending, screen, _ = _dry_run(_cluster(), "l-9")
    assert ending is Ending.BAD_SELECTION
    ((read, _),) = screen.plans
    assert read.fleet.errors and read.plans == []


def test_the_installed_webhooks_scope_is_the_plans() -> None:
    """With the chart's scope `namespaces` installed, a pod of a namespace not opted in stays
    legacy: it goes to the other legacy node, not to DRA."""
    api = _cluster()
    selector = {
        "matchExpressions": [{"key": "hami.io/gpu-migration", "operator": "In", "values": ["dra"]}]
    }
    config = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "hami-dra-webhook"},
        "webhooks": [{"name": "pods.hami.io", "namespaceSelector": selector}],
    }
    api.put(paths.WEBHOOKS, config)
    ending, screen, _ = _dry_run(api, "l-1")
    ((read, _),) = screen.plans
    assert read.inventory.scope.mode == "namespaces"
    (step,) = read.plans[0]
    assert step.goes.startswith("legacy node l-2"), step.goes
    assert ending is Ending.PLANNED
