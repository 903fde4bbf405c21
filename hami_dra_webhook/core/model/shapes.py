"""The shapes a Kubernetes object's fields come in, taken only as such: the typed views
(claim_view.py, node_view.py, resource_quota_view.py, ...) read the cluster's answers through
these, so that a field of another shape (a tenant's object, one the API would not hold) reads
as empty, never as an error."""

from __future__ import annotations

from typing import Any


def as_map(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def as_text(value: object) -> str:
    """Text as the API gives it; a number (a quantity may come as one) as its text."""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return ""


def text_map(value: object) -> dict[str, str]:
    """A map of text to text (labels, annotations, quantities), its other entries dropped."""
    return {str(k): text for k, v in as_map(value).items() if (text := as_text(v)) or v == ""}
