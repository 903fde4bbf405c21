"""Label selectors matched as Kubernetes matches them (core/model/label_selector.py), and
hostile ones (a tenant's PodDisruptionBudget, a DaemonSet's affinity) matching nothing, never
raising."""

from __future__ import annotations

from typing import Any

import pytest

from hami_dra_webhook.core.model.label_selector import matches, node_term_matches

LABELS = {"app": "a", "tier": "gpu", "gpus": "8"}


def _expression(key: Any, operator: Any, values: Any = None) -> dict[str, Any]:
    found: dict[str, Any] = {"key": key, "operator": operator}
    if values is not None:
        found["values"] = values
    return {"matchExpressions": [found]}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ({}, True),  # empty: everything
        (None, False),  # null (a PodDisruptionBudget's): nothing
        ({"matchLabels": {"app": "a"}}, True),
        ({"matchLabels": {"app": "b"}}, False),
        ({"matchLabels": {"app": "a", "tier": "gpu"}}, True),
        (_expression("tier", "Exists"), True),
        (_expression("zone", "Exists"), False),
        (_expression("tier", "DoesNotExist"), False),
        (_expression("zone", "DoesNotExist"), True),
        (_expression("tier", "In", ["gpu", "cpu"]), True),
        (_expression("zone", "In", ["x"]), False),
        (_expression("tier", "NotIn", ["gpu"]), False),
        (_expression("zone", "NotIn", ["x"]), True),  # NotIn holds where the key is absent
        ({"matchLabels": {"app": "a"}, **_expression("tier", "NotIn", ["gpu"])}, False),
    ],
)
def test_label_selectors_match_as_kubernetes_does(selector: Any, expected: bool) -> None:
    assert matches(selector, LABELS) is expected


@pytest.mark.parametrize(
    "selector",
    [
        "app=a",
        {"matchLabels": ["app"]},
        {"matchLabels": {"app": 1}},
        {"matchExpressions": {"key": "tier"}},
        {"matchExpressions": ["tier"]},
        _expression(["tier"], "Exists"),
        _expression("tier", "Exists", ["gpu"]),  # Exists takes no values
        _expression("tier", "In", []),  # In needs some
        _expression("tier", "In", "gpu"),
        _expression("tier", "In", [1]),
        _expression("tier", "Matches", ["g.*"]),
        _expression("gpus", "Gt", ["4"]),  # Gt is a node selector's only
    ],
)
def test_a_selector_that_is_not_well_formed_matches_nothing(selector: Any) -> None:
    assert matches(selector, LABELS) is False


@pytest.mark.parametrize(
    ("term", "expected"),
    [
        ({"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["4"]}]}, True),
        ({"matchExpressions": [{"key": "gpus", "operator": "Lt", "values": ["4"]}]}, False),
        ({"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["x"]}]}, False),
        ({"matchExpressions": [{"key": "app", "operator": "Gt", "values": ["1"]}]}, False),
        ({"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["1", "2"]}]}, False),
        ({"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["9" * 5000]}]}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu"]}]}, True),
        ({}, False),  # an empty term matches no node, as the scheduler's
        ({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}, True),
        ("tier", False),
    ],
)
def test_node_selector_terms(term: Any, expected: bool) -> None:
    assert node_term_matches(term, LABELS) is expected
