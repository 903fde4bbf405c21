"""RFC 6902 JSON patches built from a plan, and applying them without copying the whole document."""

from __future__ import annotations

from typing import Any, Literal, TypedDict


class PatchOp(TypedDict, total=False):
    op: Literal["add", "remove", "replace"]
    path: str
    value: Any


def escape(token: str) -> str:
    """RFC 6901 escaping of one path token: `nvidia.com/gpu` becomes `nvidia.com~1gpu`."""
    if "~" not in token and "/" not in token:
        return token
    return token.replace("~", "~0").replace("/", "~1")


def pointer(*tokens: str | int) -> str:
    return "/" + "/".join([escape(t) if isinstance(t, str) else str(t) for t in tokens])


def add(path: str, value: Any) -> PatchOp:
    return {"op": "add", "path": path, "value": value}


def remove(path: str) -> PatchOp:
    return {"op": "remove", "path": path}


def rebase(ops: list[PatchOp], prefix: str) -> list[PatchOp]:
    """The same patch against a document that holds the patched one at `prefix`."""
    return [{**op, "path": prefix + op["path"]} for op in ops]


def tokens_of(path: str) -> list[str]:
    """The unescaped tokens of an RFC 6901 pointer (`/a/nvidia.com~1gpu`: `a`, `nvidia.com/gpu`)."""
    return [t.replace("~1", "/").replace("~0", "~") for t in path.split("/")[1:]]


def apply(document: Any, ops: list[PatchOp]) -> Any:
    """Apply add/remove/replace ops, copying only the containers along each path.

    The input is never modified; untouched branches are shared with it. Only the operations this
    package emits are supported: paths into maps, list indexes and `-` for appending.
    """
    result = document
    for op in ops:
        result = _apply_one(result, tokens_of(op["path"]), op)
    return result


def _apply_one(node: Any, tokens: list[str], op: PatchOp) -> Any:
    if not tokens:
        return op["value"]
    head, rest = tokens[0], tokens[1:]
    if isinstance(node, dict):
        copy = dict(node)
        if not rest:
            if op["op"] == "remove":
                del copy[head]
            else:
                copy[head] = op["value"]
        else:
            copy[head] = _apply_one(node[head], rest, op)
        return copy
    if isinstance(node, list):
        items = list(node)
        if not rest:
            if op["op"] == "remove":
                del items[int(head)]
            elif op["op"] == "replace":
                items[int(head)] = op["value"]
            elif head == "-":
                items.append(op["value"])
            else:
                items.insert(int(head), op["value"])
        else:
            items[int(head)] = _apply_one(items[int(head)], rest, op)
        return items
    raise ValueError(f"patch path {op['path']} runs through a scalar")
