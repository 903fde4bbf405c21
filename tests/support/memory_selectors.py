"""Label and field selectors as kube-apiserver reads them from a list's or a watch's query, for
the in-memory API (tests/support/memory_api.py): `k`, `!k`, `k=v`, `k==v`, `k!=v`,
`k in (a,b)`, `k notin (a,b)`; fields `a.b=v`, `a.b!=v`."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

JsonObject = dict[str, Any]

_SET = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def selected(item: JsonObject, query: Iterable[tuple[str, str]]) -> bool:
    for name, value in query:
        if name == "labelSelector" and not _labels_match(value, _labels(item)):
            return False
        if name == "fieldSelector" and not _fields_match(value, item):
            return False
    return True


def _labels(item: JsonObject) -> dict[str, str]:
    labels = (item.get("metadata") or {}).get("labels") or {}
    return {str(k): str(v) for k, v in labels.items()}


def _requirements(selector: str) -> list[str]:
    """The comma-separated requirements, a set's own commas kept inside its parentheses."""
    found, depth, current = [], 0, ""
    for char in selector:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            found.append(current)
            current = ""
        else:
            current += char
    return [r.strip() for r in [*found, current] if r.strip()]


def _labels_match(selector: str, labels: dict[str, str]) -> bool:
    for requirement in _requirements(selector):
        in_set = _SET.match(requirement)
        if in_set:
            key, operator = in_set[1], in_set[2]
            values = {v.strip() for v in in_set[3].split(",")}
            inside = key in labels and labels[key] in values
            if inside != (operator == "in"):
                return False
        elif "!=" in requirement:
            key, value = (part.strip() for part in requirement.split("!=", 1))
            if labels.get(key) == value:
                return False
        elif "=" in requirement:
            key, value = (part.strip() for part in requirement.replace("==", "=").split("=", 1))
            if labels.get(key) != value:
                return False
        elif requirement.startswith("!"):
            if requirement[1:].strip() in labels:
                return False
        elif requirement not in labels:
            return False
    return True


def _fields_match(selector: str, item: JsonObject) -> bool:
    for requirement in _requirements(selector):
        negated = "!=" in requirement
        field_path, value = requirement.replace("!=", "=").replace("==", "=").split("=", 1)
        found: Any = item
        for part in field_path.strip().split("."):
            found = found.get(part) if isinstance(found, dict) else None
        if (str(found if found is not None else "") == value.strip()) == negated:
            return False
    return True
