"""A converted document written by editing its text where the patch says, with libyaml's node
positions, instead of a ruamel.yaml round trip (pure Python, ten times slower than reading the
document with libyaml). Everything the patch does not touch stays byte for byte, comments
included.

Only block-style YAML is edited this way; anything else (flow collections on the way, anchors,
several documents in one piece of text, a key added where one exists) raises `NotEditable`, and
the caller falls back to the round trip. The result is read back and must equal the patched
document, or it is not used: formatting is this module's business, correctness is checked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import yaml

from hami_dra_webhook.core.model import patch
from hami_dra_webhook.files.fast_yaml import FastSafeLoader

_LOADER: Any = FastSafeLoader
_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class NotEditable(Exception):
    """This document needs the round trip."""


@dataclass(frozen=True)
class _Edit:
    start: int
    end: int
    text: str
    order: int


def edit_document(
    text: str, ops: list[patch.PatchOp], expected: Any, indent: tuple[int, int]
) -> str:
    """`text` (one YAML document) with `ops` applied; `expected` is the patched document."""
    if not text.endswith("\n"):
        text += "\n"  # a last line without its newline: keys added after it start a line
    root = yaml.compose(text, Loader=_LOADER)
    if root is None:
        raise NotEditable("empty document")
    if "*" in text:  # an alias is written `*name`: without one no node is shared
        _no_shared_nodes(root, set())
    edits = [_edit(text, root, op, order, indent) for order, op in enumerate(ops)]
    result = text
    for edit in sorted(edits, key=lambda e: (e.start, e.order), reverse=True):
        result = result[: edit.start] + edit.text + result[edit.end :]
    try:
        written = yaml.load(result, Loader=_LOADER)
    except yaml.YAMLError as error:
        raise NotEditable(f"the edited text is not valid YAML: {error}") from error
    if written != expected:
        raise NotEditable("the edited text does not read back as the patched document")
    return result


def _no_shared_nodes(node: yaml.Node, seen: set[int]) -> None:
    if id(node) in seen:
        raise NotEditable("anchors and aliases")
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            _no_shared_nodes(key, seen)
            _no_shared_nodes(value, seen)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _no_shared_nodes(item, seen)


def _tokens(pointer: str) -> list[str]:
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]


def _child(node: yaml.Node, token: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == token:
                found: yaml.Node = value
                return found
        return None
    if isinstance(node, yaml.SequenceNode) and token.isdigit() and int(token) < len(node.value):
        item: yaml.Node = node.value[int(token)]
        return item
    raise NotEditable(f"cannot step into {type(node).__name__} with {token!r}")


def _block(node: yaml.Node) -> yaml.Node:
    if isinstance(node, yaml.MappingNode | yaml.SequenceNode) and node.flow_style:
        raise NotEditable("flow style")
    return node


def _edit(
    text: str, root: yaml.Node, op: patch.PatchOp, order: int, indent: tuple[int, int]
) -> _Edit:
    tokens = _tokens(op["path"])
    parent: yaml.Node = root
    for token in tokens[:-1]:
        found = _child(_block(parent), token)
        if found is None:
            raise NotEditable(f"{op['path']}: missing")
        parent = found
    parent = _block(parent)
    last = tokens[-1]
    if op["op"] == "remove":
        if not isinstance(parent, yaml.MappingNode):
            raise NotEditable("removal from a sequence")
        return _remove_key(text, parent, last, order)
    if op["op"] != "add":
        raise NotEditable(op["op"])
    if isinstance(parent, yaml.SequenceNode):
        if last != "-":
            raise NotEditable("insertion inside a sequence")
        return _append_item(text, parent, op["value"], order, indent)
    if not isinstance(parent, yaml.MappingNode) or _child(parent, last) is not None:
        raise NotEditable("replacing an existing key")
    return _add_key(text, parent, last, op["value"], order, indent)


def _line_start(text: str, index: int) -> int:
    return text.rfind("\n", 0, index) + 1


def _after_line(text: str, index: int) -> int:
    end = text.find("\n", index)
    return len(text) if end < 0 else end + 1


def _content_end(node: yaml.Node) -> int:
    """Where the node's own text ends (a block collection's end mark reaches the next token,
    comments included; its last scalar does not)."""
    while isinstance(node, yaml.MappingNode | yaml.SequenceNode) and node.value:
        last = node.value[-1]
        node = last[1] if isinstance(node, yaml.MappingNode) else last
    if isinstance(node, yaml.MappingNode | yaml.SequenceNode):
        raise NotEditable("empty collection")
    return int(node.end_mark.index)


def _remove_key(text: str, mapping: yaml.MappingNode, name: str, order: int) -> _Edit:
    for key, value in mapping.value:
        if isinstance(key, yaml.ScalarNode) and key.value == name:
            start = _line_start(text, key.start_mark.index)
            if text[start : key.start_mark.index].strip():
                raise NotEditable("the key shares its line (a sequence item's first key)")
            return _Edit(start, _after_line(text, _content_end(value)), "", order)
    raise NotEditable(f"no key {name!r} to remove")


def _add_key(
    text: str, mapping: yaml.MappingNode, name: str, value: Any, order: int, indent: tuple[int, int]
) -> _Edit:
    if not mapping.value:
        raise NotEditable("an empty mapping")
    column = mapping.value[0][0].start_mark.column
    at = _after_line(text, _content_end(mapping))
    return _Edit(at, at, _entry(name, value, column, indent), order)


def _append_item(
    text: str, sequence: yaml.SequenceNode, value: Any, order: int, indent: tuple[int, int]
) -> _Edit:
    if not sequence.value:
        raise NotEditable("an empty sequence")
    first = sequence.value[0].start_mark
    dash = first.index - 2
    if dash < 0 or text[dash : first.index] != "- ":
        raise NotEditable("an unusual sequence item")
    column = first.column - 2
    at = _after_line(text, _content_end(sequence))
    return _Edit(at, at, _item(value, column, indent), order)


def _scalar(value: Any) -> str:
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
    return dumped.removesuffix("\n...\n").removesuffix("\n")


# The text of keys and values written (the same few, document after document), remembered.
_REMEMBERED_TYPES: Final = frozenset((str, int, bool, type(None)))
_SCALARS: dict[tuple[type, Any], str] = {}
_MOST_SCALARS: Final = 4096


def _entry(name: str, value: Any, column: int, indent: tuple[int, int]) -> str:
    mapping, offset = indent
    head = " " * column + _scalar(name) + ":"
    if isinstance(value, dict) and value:
        return (
            head + "\n" + "".join(_entry(k, v, column + mapping, indent) for k, v in value.items())
        )
    if isinstance(value, list) and value:
        return head + "\n" + "".join(_item(v, column + offset, indent) for v in value)
    return f"{head} {_scalar(value)}\n"


def _item(value: Any, column: int, indent: tuple[int, int]) -> str:
    if isinstance(value, dict) and value:
        # The first entry sits on the dash's line; the others line up under it.
        lines = "".join(_entry(k, v, column + 2, indent) for k, v in value.items())
        return " " * column + "- " + lines[column + 2 :]
    if isinstance(value, list):
        raise NotEditable("a list inside a list")
    return " " * column + "- " + _scalar(value) + "\n"
