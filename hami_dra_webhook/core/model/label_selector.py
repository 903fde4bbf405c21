"""Kubernetes label selectors, matched in one place: a metav1.LabelSelector (a
PodDisruptionBudget's, a webhook's namespaceSelector) and a NodeSelectorTerm's
matchExpressions (a DaemonSet's node affinity, where Gt and Lt are allowed too).

What is matched may be anything's text (a tenant writes PodDisruptionBudgets), so a selector
that is not well formed (an unknown operator, values where none belong or none where they must
be, a key or value that is not text) matches nothing, as kube-apiserver would not have stored
it; nothing here raises."""

from __future__ import annotations

from collections.abc import Mapping

SET_OPERATORS = frozenset({"In", "NotIn"})
EXISTENCE_OPERATORS = frozenset({"Exists", "DoesNotExist"})
NUMBER_OPERATORS = frozenset({"Gt", "Lt"})  # node selector requirements only


def matches(selector: object, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector against `labels`: every matchLabels pair and every
    matchExpressions requirement holds (an empty selector matches everything; one that is not
    a selector, None included, matches nothing, as a PodDisruptionBudget's null selector)."""
    if not isinstance(selector, dict):
        return False
    pairs = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not isinstance(pairs, dict) or not isinstance(expressions, list):
        return False
    for key, value in pairs.items():
        if not isinstance(value, str) or labels.get(key) != value:
            return False
    return all(_holds(e, labels, frozenset()) for e in expressions)


def node_term_matches(term: object, labels: Mapping[str, str]) -> bool:
    """A NodeSelectorTerm's matchExpressions against a node's `labels` (its matchFields, which
    name nodes, are not judged here); a term without requirements matches nothing, as the
    scheduler's."""
    if not isinstance(term, dict):
        return False
    expressions = term.get("matchExpressions") or []
    if not isinstance(expressions, list) or not (expressions or term.get("matchFields")):
        return False
    return all(_holds(e, labels, NUMBER_OPERATORS) for e in expressions)


def _holds(expression: object, labels: Mapping[str, str], numbers: frozenset[str]) -> bool:
    if not isinstance(expression, dict):
        return False
    key, operator = expression.get("key"), expression.get("operator")
    values = expression.get("values") or []
    if not isinstance(key, str) or not isinstance(values, list):
        return False
    if not all(isinstance(v, str) for v in values):
        return False
    present = key in labels
    if operator in SET_OPERATORS and values:
        inside = present and labels[key] in values
        return inside if operator == "In" else not inside
    if operator in EXISTENCE_OPERATORS and not values:
        return present if operator == "Exists" else not present
    if operator in numbers and len(values) == 1:
        return present and _compare(labels[key], values[0], operator)
    return False


def _compare(label: str, bound: str, operator: object) -> bool:
    try:
        have, limit = int(label), int(bound)
    except ValueError:
        return False
    return have > limit if operator == "Gt" else have < limit
