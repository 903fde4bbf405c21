"""ruamel's round trip writes flow collections without inner spaces (`{ app: burner }` becomes
`{app: burner}`): noise in a GitOps diff on lines convert did not change. The lines it rewrote
only so are given back as the file wrote them, and a flow map convert added to is spaced as the
file spaces its others."""

from __future__ import annotations

import re

# Spaces just inside a flow collection's brackets.
_INNER = re.compile(r"([{\[]) +| +([}\]])")
# A line whose only flow collection is one map of plain entries: `labels: {a: b, c: 'd'}`.
_ONE_MAP = re.compile(r"^(?P<head>[^{}\[\]\"'#]*: )\{(?P<inside>[^{}\[\]#]+)\}(?P<tail>\s*)$")


def _unspaced(line: str) -> str:
    return _INNER.sub(lambda m: m.group(1) or m.group(2), line)


def keep_flow_spacing(original: str, dumped: str) -> str:
    """`dumped` (ruamel's text of `original`, edited) with the inner spaces of its flow
    collections as `original` writes them."""
    spaced: dict[str, str] = {}
    for line in original.splitlines():
        if "{" in line or "[" in line:
            key = _unspaced(line)
            if key != line:
                spaced.setdefault(key, line)
    if not spaced:
        return dumped
    out = []
    for line in dumped.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        end = line[len(body) :]
        if "{" in body or "[" in body:
            kept = spaced.get(body)
            if kept is None:
                one = _ONE_MAP.match(body)
                if one is not None:
                    kept = f"{one['head']}{{ {one['inside'].strip()} }}{one['tail']}"
            body = kept if kept is not None else body
        out.append(body + end)
    return "".join(out)
