"""A converted document written by editing its text where the patch says, with libyaml's node
positions, instead of a ruamel.yaml round trip (pure Python, ten times slower than reading the
document with libyaml, and it rewrites what it reads: quoting, line breaks, indentation,
trailing spaces). Everything the patch does not touch stays byte for byte, comments included.

Block and flow collections are both edited: a key added to `labels: {app: a}` goes in before
its `}`, in the map's own quoting; a removed flow entry takes its comma with it. What is added
in block style follows the indentation of its neighbours (else of the file). What cannot be
edited so (a path through an anchored or aliased node, a removed key that shares its line with a
sequence item's dash, a path made by an earlier operation) raises `NotEditable`, and the caller
falls back to the round trip. The result is read back and must equal the patched document, or
it is not used: formatting is this module's business, correctness is checked.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

import yaml

from hami_dra_webhook.core.model import patch
from hami_dra_webhook.files.fast_yaml import FastSafeLoader
from hami_dra_webhook.migrate.yaml_positions import (
    after_line,
    column_of,
    content_end,
    dash_of,
    flow_span,
    line_start,
    no_alias,
    shared_nodes,
)
from hami_dra_webhook.migrate.yaml_text import (
    NotEditable,
    block_entry,
    block_item,
    flow_entry,
    flow_value,
    scalar_text,
)

__all__ = ["NotEditable", "edit_document"]

_LOADER: Any = FastSafeLoader
_MAPPING, _SEQUENCE = yaml.MappingNode, yaml.SequenceNode


@dataclass(frozen=True)
class _Edit:
    start: int
    end: int
    text: str
    order: int
    # Of two insertions at one place, the deeper one (into a more indented mapping) goes first:
    # it belongs to the collection that ends there, the shallower one to its parent.
    depth: int = 0


@dataclass(frozen=True)
class _Style:
    """How the file writes what is added: (mapping indent, dash offset) and its line break."""

    indent: tuple[int, int]
    newline: str
    gap: int = 1  # spaces after a dash (`- name`, `-   name`)
    json: bool = False  # a JSON document: what is added is JSON too
    # The children the ops remove, by the collection holding them (a flow insertion goes after
    # the last entry that stays, and takes no comma when none does).
    removed: frozenset[int] = frozenset()


def edit_document(
    text: str, ops: list[patch.PatchOp], expected: Any, indent: tuple[int, int]
) -> str:
    """`text` (one YAML document) with `ops` applied; `expected` is the patched document."""
    newline = "\r\n" if "\r\n" in text else "\n"
    ended = text.endswith("\n")
    if not ended:
        text += newline  # a last line without its newline: keys added after it start a line
    root = yaml.compose(text, Loader=_LOADER)
    if root is None:
        raise NotEditable("empty document")
    shared = shared_nodes(root) if ("*" in text or "&" in text) else frozenset()
    gap = _DASH_GAP.search(text)
    folded = _folded(ops)
    style = _Style(
        indent,
        newline,
        len(gap.group(1)) if gap else 1,
        text.lstrip().startswith(("{", "[")),
        _removed(root, folded),
    )
    edits = [_edit(text, root, op, order, style, shared) for order, op in enumerate(folded)]
    _no_overlap(edits)
    result = text
    # Back to front; at one place a removal before the insertions there (they stay before
    # what follows it), the deeper insertion last (it ends up first).
    order = sorted(edits, key=lambda e: (e.start, e.end > e.start, -e.depth, e.order))
    for edit in reversed(order):
        result = result[: edit.start] + edit.text + result[edit.end :]
    if not ended and not any(e.start >= len(text) for e in edits):
        result = result[: -len(newline)]
    try:
        written = yaml.load(result, Loader=_LOADER)
    except yaml.YAMLError as error:
        raise NotEditable(f"the edited text is not valid YAML: {error}") from error
    if written != expected:
        raise NotEditable("the edited text does not read back as the patched document")
    return result


_DASH_GAP = re.compile(r"^[ \t]*-( +)[A-Za-z_\"']", re.MULTILINE)


def _removed(root: yaml.Node, ops: list[patch.PatchOp]) -> frozenset[int]:
    """The nodes (a removed key's value, a removed item) that `remove` ops take away."""
    found: set[int] = set()
    for op in ops:
        if op["op"] != "remove":
            continue
        node: yaml.Node | None = root
        try:
            for token in patch.tokens_of(op["path"]):
                node = _child(node, token) if node is not None else None
        except NotEditable:
            continue
        if node is not None:
            found.add(id(node))
    return frozenset(found)


def _folded(ops: list[patch.PatchOp]) -> list[patch.PatchOp]:
    """The ops with each one that reaches inside a value an earlier op adds put into that
    value: every op then names a path of the text as it was."""
    out: list[patch.PatchOp] = []
    for op in ops:
        for index, earlier in enumerate(out):
            head = earlier["path"]
            if (
                earlier["op"] in ("add", "replace")
                and not head.endswith("/-")
                and op["path"].startswith(head + "/")
            ):
                inner: patch.PatchOp = {**op, "path": op["path"][len(head) :]}
                try:
                    value = patch.apply(earlier["value"], [inner])
                except (KeyError, IndexError, ValueError, TypeError) as error:
                    raise NotEditable(f"{op['path']}: {error}") from error
                out[index] = {**earlier, "value": value}
                break
        else:
            out.append(op)
    return out


def _no_overlap(edits: list[_Edit]) -> None:
    spans = sorted((e.start, e.end) for e in edits if e.end > e.start)
    for (_, end), (start, _) in itertools.pairwise(spans):
        if start < end:
            raise NotEditable("two operations edit the same text")


def _entry_of(node: yaml.MappingNode, token: str) -> tuple[yaml.Node, yaml.Node] | None:
    for key, value in node.value:
        if isinstance(key, yaml.ScalarNode) and key.value == token:
            return key, value
    return None


def _child(node: yaml.Node, token: str) -> yaml.Node | None:
    if isinstance(node, _MAPPING):
        entry = _entry_of(node, token)
        return None if entry is None else entry[1]
    if isinstance(node, _SEQUENCE) and token.isdigit() and int(token) < len(node.value):
        item: yaml.Node = node.value[int(token)]
        return item
    raise NotEditable(f"cannot step into {type(node).__name__} with {token!r}")


def _edit(
    text: str,
    root: yaml.Node,
    op: patch.PatchOp,
    order: int,
    style: _Style,
    shared: frozenset[int],
) -> _Edit:
    tokens = patch.tokens_of(op["path"])
    if not tokens:
        raise NotEditable("the whole document")
    parent: yaml.Node = root
    for token in tokens[:-1]:
        if id(parent) in shared:
            raise NotEditable("anchors and aliases on the edited path")
        found = _child(parent, token)
        if found is None:
            raise NotEditable(f"{op['path']}: missing")
        parent = found
    if id(parent) in shared:
        raise NotEditable("anchors and aliases on the edited path")
    last = tokens[-1]
    kind = op["op"]
    if isinstance(parent, _SEQUENCE):
        if kind == "remove" and last.isdigit() and int(last) < len(parent.value):
            return _remove_item(text, parent, int(last), order)
        if kind == "add" and last == "-":
            return _append_item(text, parent, op["value"], order, style)
        raise NotEditable(f"{kind} inside a sequence")
    if not isinstance(parent, _MAPPING):
        raise NotEditable(f"{op['path']}: not in a mapping")
    entry = _entry_of(parent, last)
    if kind == "remove":
        if entry is None:
            raise NotEditable(f"no key {last!r} to remove")
        return _remove_key(text, parent, entry, order)
    if kind not in ("add", "replace"):
        raise NotEditable(kind)
    if entry is not None:
        return _replace_value(text, parent, entry, op["value"], order, style)
    return _add_key(text, parent, last, op["value"], order, style)


def _remove_key(
    text: str, mapping: yaml.MappingNode, entry: tuple[yaml.Node, yaml.Node], order: int
) -> _Edit:
    key, value = entry
    no_alias(key, value)
    if mapping.flow_style:
        start, end = flow_span(
            text, key.start_mark.index, content_end(value, text), mapping.end_mark.index - 1
        )
        return _Edit(start, end, "", order)
    start = line_start(text, key.start_mark.index)
    if text[start : key.start_mark.index].strip():
        # A sequence item's first key (`- resources:`): the next key moves up to the dash.
        following = [k for k, _ in mapping.value if k.start_mark.index > key.start_mark.index]
        if not following:
            raise NotEditable("the key shares its line and has no key after it")
        return _Edit(key.start_mark.index, following[0].start_mark.index, "", order)
    return _Edit(start, after_line(text, content_end(value, text)), "", order)


def _remove_item(text: str, sequence: yaml.SequenceNode, index: int, order: int) -> _Edit:
    item = sequence.value[index]
    if sequence.flow_style:
        start, end = flow_span(
            text, item.start_mark.index, content_end(item, text), sequence.end_mark.index - 1
        )
        return _Edit(start, end, "", order)
    dash = dash_of(text, item)
    start = line_start(text, dash)
    if text[start:dash].strip():
        raise NotEditable("the item shares its line")
    return _Edit(start, after_line(text, content_end(item, text)), "", order)


def _local_indent(text: str, mapping: yaml.MappingNode, style: _Style) -> tuple[int, int]:
    """The indentation the mapping's own block children use, else the file's."""
    mapping_indent, offset = style.indent
    found_mapping = found_offset = False
    for key, value in mapping.value:
        column = key.start_mark.column
        if isinstance(value, _MAPPING) and not value.flow_style and value.value:
            if not found_mapping:
                mapping_indent = value.value[0][0].start_mark.column - column
                found_mapping = mapping_indent > 0
        elif isinstance(value, _SEQUENCE) and not value.flow_style and value.value:
            first = value.value[0]
            if not found_offset and first.start_mark.line != key.start_mark.line:
                dash_column = column_of(text, dash_of(text, first))
                if dash_column >= column:
                    offset, found_offset = dash_column - column, True
    if not found_mapping:
        mapping_indent = style.indent[0]
    return (max(mapping_indent, 1), offset)


def _add_key(
    text: str, mapping: yaml.MappingNode, name: str, value: Any, order: int, style: _Style
) -> _Edit:
    if mapping.flow_style:
        written = flow_entry(mapping, name, value, style.json)
        return _flow_insert(text, mapping, written, order, style)
    if not mapping.value:
        raise NotEditable("an empty mapping")
    column = mapping.value[0][0].start_mark.column
    at = after_line(text, content_end(mapping, text))
    written = block_entry(name, value, column, _local_indent(text, mapping, style), style.gap)
    return _Edit(at, at, _lines(written, style), order, column)


def _replace_value(
    text: str,
    mapping: yaml.MappingNode,
    entry: tuple[yaml.Node, yaml.Node],
    value: Any,
    order: int,
    style: _Style,
) -> _Edit:
    key, old = entry
    no_alias(key, old)
    if mapping.flow_style or (isinstance(old, _MAPPING | _SEQUENCE) and old.flow_style):
        written = flow_value(value, style.json)
        return _Edit(old.start_mark.index, content_end(old, text), written, order)
    if (not isinstance(value, dict | list) or not value) and (
        isinstance(old, yaml.ScalarNode)
        and old.value
        and "\n" not in text[old.start_mark.index : old.end_mark.index]
    ):
        return _Edit(old.start_mark.index, old.end_mark.index, scalar_text(value), order)
    column = key.start_mark.column
    written = block_entry(key.value, value, column, _local_indent(text, mapping, style), style.gap)
    empty = isinstance(old, yaml.ScalarNode) and old.start_mark.index == old.end_mark.index
    if empty and isinstance(value, dict | list) and value:
        # `metadata:` with nothing after it: the key's line stays, what it holds goes under it.
        at = after_line(text, key.end_mark.index)
        children = written.split("\n", 1)[1]
        return _Edit(at, at, _lines(children, style), order, column + 1)
    start = line_start(text, key.start_mark.index)
    if text[start : key.start_mark.index].strip():
        raise NotEditable("the key shares its line (a sequence item's first key)")
    return _Edit(start, after_line(text, content_end(old, text)), _lines(written, style), order)


def _append_item(
    text: str, sequence: yaml.SequenceNode, value: Any, order: int, style: _Style
) -> _Edit:
    if sequence.flow_style:
        return _flow_insert(text, sequence, flow_value(value, style.json), order, style)
    if not sequence.value:
        raise NotEditable("an empty sequence")
    first = sequence.value[0]
    dash = dash_of(text, first)
    if text[line_start(text, dash) : dash].strip():
        raise NotEditable("an unusual sequence item")
    column = column_of(text, dash)
    gap = first.start_mark.index - dash - 1
    if gap < 1 or "\n" in text[dash : first.start_mark.index]:
        gap = 1
    at = after_line(text, content_end(sequence, text))
    written = block_item(value, column, style.indent, gap)
    return _Edit(at, at, _lines(written, style), order, column + 1)


def _flow_insert(text: str, node: yaml.Node, written: str, order: int, style: _Style) -> _Edit:
    """`written` as the last entry of a flow collection, after the last entry that stays."""
    closing = int(node.end_mark.index) - 1
    if text[closing] not in "}]":
        raise NotEditable("a flow collection without its bracket")
    values = [pair[1] for pair in node.value] if isinstance(node, _MAPPING) else node.value
    staying = [v for v in values if id(v) not in style.removed]
    if staying:
        at = content_end(staying[-1], text)
        between = text[at:closing]
        if staying[-1] is values[-1] and "," in between:  # a trailing comma: after it
            at = at + between.index(",") + 1
            return _Edit(at, at, " " + written + ",", order)
        return _Edit(at, at, ", " + written, order)
    return _Edit(closing, closing, written, order)


def _lines(written: str, style: _Style) -> str:
    return written if style.newline == "\n" else written.replace("\n", style.newline)
