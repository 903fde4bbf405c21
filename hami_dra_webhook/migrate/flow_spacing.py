"""ruamel's round trip rewrites flow collections (`{ app: burner }` becomes `{app: burner}`,
`[{ containerPort: 80 }]` becomes `[containerPort: 80]`): noise in a GitOps diff on lines
convert did not change. A line it rewrote only so is given back as the file wrote it, and a
flow map convert added to is spaced as the file spaces its others."""

from __future__ import annotations

import re
from typing import Any

import yaml

# A line whose only flow collection is one map of plain entries: `labels: {a: b, c: 'd'}`.
_ONE_MAP = re.compile(r"^(?P<head>[^{}\[\]\"'#]*: )\{(?P<inside>[^{}\[\]#]+)\}(?P<tail>\s*)$")
_FLOW = re.compile(r"[{\[]")


def _head(line: str) -> str:
    """The line up to its first flow bracket: its indentation, key and dash."""
    found = _FLOW.search(line)
    return line[: found.start()] if found else line


def _value(line: str) -> Any:
    try:
        return yaml.safe_load(line.strip())
    except yaml.YAMLError:
        return _FLOW  # never equal to a value read


def keep_flow_spacing(original: str, dumped: str) -> str:
    """`dumped` (ruamel's text of `original`, edited) with its flow collections written as
    `original` writes them wherever a line holds the same value."""
    by_head: dict[str, list[str]] = {}
    for line in original.splitlines():
        if _FLOW.search(line):
            by_head.setdefault(_head(line), []).append(line)
    if not by_head:
        return dumped
    spaced = any("{ " in line for lines in by_head.values() for line in lines)
    out = []
    for line in dumped.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        end = line[len(body) :]
        if _FLOW.search(body):
            candidates = by_head.get(_head(body), [])
            if body not in candidates:
                value = _value(body)
                kept = next((c for c in candidates if _value(c) == value), None)
                one = _ONE_MAP.match(body) if kept is None and spaced else None
                if one is not None:
                    kept = f"{one['head']}{{ {one['inside'].strip()} }}{one['tail']}"
                body = kept if kept is not None else body
        out.append(body + end)
    return "".join(out)
