"""YAML text for what `text_edit` adds: scalars as libyaml writes them (remembered: the same
few, document after document), block entries and items at a given column, flow values."""

from __future__ import annotations

import json
from typing import Any, Final

import yaml

_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class NotEditable(Exception):
    """This document needs the round trip."""


def flow_entry(mapping: yaml.MappingNode, name: str, value: Any, as_json: bool = False) -> str:
    """`name: value` in a flow map, in JSON where the document or the map's keys are."""
    if as_json or (mapping.value and getattr(mapping.value[0][0], "style", None) == '"'):
        return json.dumps(name) + ": " + json.dumps(value, separators=(", ", ": "))
    return scalar_text(name) + ": " + flow_value(value)


def flow_value(value: Any, as_json: bool = False) -> str:
    if as_json:
        return json.dumps(value, separators=(", ", ": "))
    if isinstance(value, dict | list):
        return _dumped(value)
    return scalar_text(value)


def scalar_text(value: Any) -> str:
    kind = type(value)
    if kind not in _REMEMBERED_TYPES:  # floats too: -0.0 and 0.0 are one key, two texts
        return _dumped(value)
    key = (kind, value)
    text = _SCALARS.get(key)
    if text is None:
        if len(_SCALARS) >= _MOST_SCALARS:
            _SCALARS.clear()
        text = _SCALARS[key] = _dumped(value)
    return text


def _dumped(value: Any) -> str:
    dumped: str = yaml.dump(value, Dumper=_DUMPER, default_flow_style=True, width=1 << 30)
    dumped = dumped.removesuffix("\n...\n").removesuffix("\n")
    if "\n" in dumped:
        raise NotEditable("a value that spans lines")
    return dumped


# The text of keys and values written (the same few, document after document), remembered.
_REMEMBERED_TYPES: Final = frozenset((str, int, bool, type(None)))
_SCALARS: dict[tuple[type, Any], str] = {}
_MOST_SCALARS: Final = 4096


def block_entry(name: str, value: Any, column: int, indent: tuple[int, int], gap: int = 1) -> str:
    mapping, offset = indent
    head = " " * column + scalar_text(name) + ":"
    if isinstance(value, dict) and value:
        return (
            head
            + "\n"
            + "".join(block_entry(k, v, column + mapping, indent, gap) for k, v in value.items())
        )
    if isinstance(value, list) and value:
        return head + "\n" + "".join(block_item(v, column + offset, indent, gap) for v in value)
    return f"{head} {scalar_text(value)}\n"


def block_item(value: Any, column: int, indent: tuple[int, int], gap: int = 1) -> str:
    dash = " " * column + "-" + " " * gap
    if isinstance(value, dict) and value:
        # The first entry sits on the dash's line; the others line up under it.
        lines = "".join(block_entry(k, v, column + 1 + gap, indent, gap) for k, v in value.items())
        return dash + lines[column + 1 + gap :]
    if isinstance(value, list):
        raise NotEditable("a list inside a list")
    return dash + scalar_text(value) + "\n"
