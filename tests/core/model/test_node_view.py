"""A Node read once into its view (core/model/node_view.py), through the shapes every view
reads with (core/model/shapes.py): a Node as kube-apiserver returns it read whole, anything
else read as less."""

from __future__ import annotations

from typing import Any

import pytest

from hami_dra_webhook.core.migration.move_state import fleet_summary
from hami_dra_webhook.core.model.node_view import NodeView
from hami_dra_webhook.core.model.shapes import as_text, text_map

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "gpu-1",
        "labels": {"hami.io/gpu-pool": "dra", "nvidia.com/gpu.present": "true"},
        "annotations": {"hami.io/gpu-pool-move": "", "note": "x"},
    },
    "spec": {"unschedulable": True},
    "status": {"allocatable": {"nvidia.com/gpu": "10", "cpu": "8"}},
}


def test_a_node_as_kube_apiserver_returns_it() -> None:
    view = NodeView.of(NODE)
    assert view.name == "gpu-1" and view.unschedulable
    assert view.labels["hami.io/gpu-pool"] == "dra"
    assert view.annotations == {"hami.io/gpu-pool-move": "", "note": "x"}
    assert view.allocatable["nvidia.com/gpu"] == "10"


@pytest.mark.parametrize(
    "node",
    [
        None,
        [],
        {"metadata": []},
        {"metadata": {"name": ["gpu-1"], "labels": ["a"]}},
        {"metadata": {"labels": {"a": {"b": 1}}}, "spec": {"unschedulable": "yes"}},
        {"status": {"allocatable": "all"}},
    ],
)
def test_what_is_not_a_node_reads_as_less(node: Any) -> None:
    view = NodeView.of(node)
    assert view.name == "" and not view.unschedulable
    assert dict(view.labels) == {} and dict(view.allocatable) == {}


def test_the_shapes() -> None:
    assert (as_text("a"), as_text(3), as_text(2.5), as_text(True), as_text(None)) == (
        "a", "3", "2.5", "", ""
    )  # fmt: skip
    assert text_map({"a": "1", "b": 2, "c": [3], "d": "", 5: "e"}) == {
        "a": "1", "b": "2", "d": "", "5": "e"
    }  # fmt: skip


def test_a_fleet_summary_skips_what_is_not_a_node() -> None:
    summary = fleet_summary([NODE, {"metadata": "x"}, None], 0.0)  # type: ignore[list-item]
    assert summary.pools["dra"] == 1 and sum(summary.pools.values()) == 1
