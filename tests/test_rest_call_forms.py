"""Which `kubectl get` forms tests/support/rest_calls.py reads itself, and which it leaves to
kubectl (tests/e2e/test_rest_calls.py compares its answers with kubectl's on each flavor)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.rest_calls import parse


@pytest.mark.parametrize(
    ("args", "read"),
    [
        (("pods", "-n", "x"), ("pods", None, "x", None, None)),
        (("pod/p", "--namespace=x"), ("pod", "p", "x", None, None)),
        (("pods", "-A", "-l", "a=b"), ("pods", None, None, "a=b", None)),
        (("nodes",), ("nodes", None, "default", None, None)),
        (
            ("-o", "json", "events", "--field-selector", "reason=X"),
            ("events", None, "default", None, "reason=X"),
        ),
        (("pods", "-o", "yaml"), None),
        (("pods,claims",), ("pods,claims", None, "default", None, None)),
        (("pods,claims", "x"), None),
        (("pods", "a", "b"), None),
        (("pods", "-w"), None),
        (("pods", "-n"), None),
    ],
)
def test_the_forms_read_and_the_ones_left_to_kubectl(
    args: tuple[str, ...], read: tuple[Any, ...] | None
) -> None:
    query = parse(args)
    found = (
        None
        if query is None
        else (query.resource, query.name, query.namespace, query.labels, query.fields)
    )
    assert found == read
