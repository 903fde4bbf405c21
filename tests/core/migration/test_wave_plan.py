"""A fleet's waves without a cluster (core/migration/wave_plan.py): which nodes, a canary first, waves
bounded by --batch and --max-unavailable, resumed moves first, and each wave's plan with all
of its nodes left out as destinations."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hami_dra_webhook.core.migration.pool_plan import plan_move
from hami_dra_webhook.core.migration.wave_plan import (
    MaxUnavailable,
    parse_max_unavailable,
    plan_fleet,
)
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from tests.core.migration.test_pools import inventory, legacy_pod, node, resource_slice


def _state(to: str, step: str) -> str:
    return json.dumps({"to": to, "from": "legacy", "step": step, "cordonedByMove": True})


def _moving(name: str, to: str, step: str, **kw: Any) -> dict[str, Any]:
    found = node(name, **kw)
    found["metadata"]["annotations"] = {"hami.io/gpu-pool-move": _state(to, step)}
    return found


def _fleet() -> Any:
    """Five legacy nodes of 4 slots (a..e; c holds no pod), one DRA node, one CPU node."""
    nodes = [node(n, slots=4, pool="legacy") for n in "abcde"]
    nodes.append(node("dra-1", pool="dra"))
    nodes.append({"metadata": {"name": "cpu", "labels": {}}, "spec": {}, "status": {}})
    pods = [legacy_pod(f"p-{n}", n) for n in "abde"] + [legacy_pod("p-a2", "a")]
    return inventory(nodes, [resource_slice("dra-1", "24Gi", "24Gi")], pods)


def test_a_canary_goes_alone_first_then_waves_of_batch() -> None:
    plan = plan_fleet(_fleet(), [*"abcde", "dra-1", "cpu"], "dra", 2, MaxUnavailable())
    assert not plan.errors
    assert plan.canary == "c"  # the fewest GPU pods to move
    assert plan.waves == [["c"], ["a", "b"], ["d", "e"]]
    assert ("dra-1", "already in the dra pool") in plan.skipped
    assert any(node == "cpu" and "not a GPU node" in why for node, why in plan.skipped)


def test_max_unavailable_bounds_a_wave_in_nodes_or_gpus() -> None:
    fleet = _fleet()
    by_nodes = plan_fleet(fleet, "abcde", "dra", 10, MaxUnavailable(nodes=3), canary="e")
    assert by_nodes.waves == [["e"], ["a", "b", "c"], ["d"]]
    by_gpus = plan_fleet(fleet, "abcde", "dra", 10, parse_max_unavailable("8gpus"))
    assert by_gpus.waves == [["c"], ["a", "b"], ["d", "e"]]  # 4 slots a node
    too_small = plan_fleet(fleet, "abcde", "dra", 10, parse_max_unavailable("3gpus"))
    assert too_small.waves == [] and "more than --max-unavailable 3 GPUs" in too_small.errors[0]


def test_a_second_run_resumes_the_stopped_moves_first_and_tests_no_canary() -> None:
    nodes = [node(n, slots=4, pool="legacy") for n in "ab"]
    nodes.append(_moving("c", "dra", "drained", slots=4, pool="legacy"))
    nodes.append(node("d", pool="dra"))  # moved by the first run
    fleet = inventory(nodes, [resource_slice("d", "24Gi")])
    plan = plan_fleet(fleet, "abcd", "dra", 2, MaxUnavailable())
    assert plan.canary == "" and plan.waves == [["c"], ["a", "b"]]


def test_a_move_the_other_way_or_an_unknown_node_stops_the_fleet() -> None:
    nodes = [node("a", slots=4, pool="legacy"), _moving("b", "legacy", "cordoned", pool="dra")]
    plan = plan_fleet(inventory(nodes, []), ["a", "b", "zz"], "dra", 1, MaxUnavailable())
    assert plan.waves == []
    assert any("b: a move to legacy is under way" in e for e in plan.errors), plan.errors
    assert "no node named zz" in plan.errors


@pytest.mark.parametrize("text", ["0", "-1", "3 pods", "gpus", ""])
def test_max_unavailable_says_what_to_write(text: str) -> None:
    with pytest.raises(ValueError, match="give a number of nodes"):
        parse_max_unavailable(text)


def test_a_waves_pods_must_fit_outside_the_whole_wave() -> None:
    """Two legacy nodes with one pod each and no room elsewhere: moved one at a time, each
    node's pod fits on the other; moved together (one wave), neither fits."""
    nodes = [node("a", slots=1, pool="legacy"), node("b", slots=1, pool="legacy")]
    nodes.append(node("c", slots=2, pool="legacy"))
    pods = [legacy_pod("p-a", "a"), legacy_pod("p-b", "b"), legacy_pod("p-c", "c")]
    fleet = inventory(nodes, [], pods, scope=_nobody())
    alone = plan_move(fleet, "a", "dra", DEFAULT_POLICY)
    assert [s.fits for s in alone] == [True]  # onto c's free slot
    together = plan_move(fleet, ["a", "c"], "dra", DEFAULT_POLICY)
    assert [s.node for s in together] == ["a", "c"]
    assert [s.fits for s in together] == [False, False]
    assert all(s.blocks for s in together)


def _nobody() -> Any:
    from hami_dra_webhook.core.migration.pools import Scope

    return Scope("namespaces")  # no namespace opted in: every pod stays legacy


def test_the_fleet_summary_counts_pools_moves_and_the_oldest() -> None:
    """What the webhook's metrics show of the Nodes (hami_dra_gpu_pool_*)."""
    import calendar
    import time

    from hami_dra_webhook.core.migration.move_state import fleet_summary

    def state(step: str, started: str, error: str = "") -> str:
        data = {"to": "dra", "from": "legacy", "step": step, "cordonedByMove": True}
        return json.dumps(data | {"startedAt": started, "error": error})

    moving = node("m", pool="moving")
    moving["metadata"]["annotations"] = {
        "hami.io/gpu-pool-move": state("drained", "2026-12-05T10:00:00Z")
    }
    stopped = node("s", slots=4, pool="legacy")
    stopped["metadata"]["annotations"] = {
        "hami.io/gpu-pool-move": state("cordoned", "2026-12-05T11:00:00Z", "timed out")
    }
    nodes = [node("a", slots=4, pool="legacy"), node("b", pool="dra"), node("c"), moving, stopped]
    nodes.append({"metadata": {"name": "cpu", "labels": {}}, "spec": {}, "status": {}})
    now = calendar.timegm(time.strptime("2026-12-05T12:00:00", "%Y-%m-%dT%H:%M:%S"))
    summary = fleet_summary(nodes, now)
    assert summary.pools == {"legacy": 2, "dra": 1, "moving": 1, "": 1}
    assert summary.steps["drained"] == 1 and summary.steps["cordoned"] == 1
    assert summary.oldest_seconds == 7200 and summary.stopped == 1
    assert fleet_summary([], now).oldest_seconds == 0


def test_moves_followed_across_checks_give_durations_and_stops_once() -> None:
    """hami_dra_gpu_pool_move_duration_seconds and _move_failures_total: a move seen under way
    and then gone from a node in a pool ended; each stop is counted once, by its step."""
    import calendar
    import time

    from hami_dra_webhook.core.migration.move_state import MoveWatch

    def at(stamp: str) -> float:
        return float(calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S")))

    def moving(step: str, updated: str, error: str = "", pool: str = "moving") -> dict[str, Any]:
        found = node("m", pool=pool)
        data = {"to": "dra", "from": "legacy", "step": step, "cordonedByMove": True}
        data |= {"startedAt": "2026-12-05T10:00:00Z", "updatedAt": updated, "error": error}
        found["metadata"]["annotations"] = {"hami.io/gpu-pool-move": json.dumps(data)}
        return found

    watch = MoveWatch()
    assert watch.see([moving("drained", "2026-12-05T10:01:00Z")], at("2026-12-05T10:01:30")) == (
        [],
        [],
    )
    stop = moving("unserved", "2026-12-05T10:05:00Z", "timed out", pool="dra")
    assert watch.see([stop], at("2026-12-05T10:05:30")) == ([], ["unserved"])
    assert watch.see([stop], at("2026-12-05T10:06:00")) == ([], [])  # the same stop: once
    again = moving("unserved", "2026-12-05T10:20:00Z", "timed out again", pool="dra")
    assert watch.see([again], at("2026-12-05T10:20:30")) == ([], ["unserved"])
    done = node("m", pool="dra")
    assert watch.see([done], at("2026-12-05T10:30:00")) == ([1800.0], [])
    assert watch.see([done], at("2026-12-05T10:31:00")) == ([], [])  # ended once
