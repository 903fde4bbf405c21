"""Where things are in a YAML document's text, from libyaml's node marks: a node's last
character, a line's bounds, a flow entry with its comma, a block item's dash, the nodes an anchor
shares."""

from __future__ import annotations

import yaml

from hami_dra_webhook.migrate.yaml_text import NotEditable

_MAPPING, _SEQUENCE = yaml.MappingNode, yaml.SequenceNode


def shared_nodes(root: yaml.Node) -> frozenset[int]:
    """The nodes reached more than once (an anchor and its aliases) and everything inside them:
    editing one would edit every place that names it. Each node is walked at most twice (an
    alias is not walked again), so nested aliases cannot make it expensive."""
    seen: set[int] = set()
    again: set[int] = set()

    def find(node: yaml.Node) -> None:
        if id(node) in seen:
            again.add(id(node))
            return
        seen.add(id(node))
        for child in _children(node):
            find(child)

    shared: set[int] = set()
    visited: set[tuple[int, bool]] = set()

    def mark(node: yaml.Node, inside: bool) -> None:
        inside = inside or id(node) in again
        if (id(node), inside) in visited:
            return
        visited.add((id(node), inside))
        if inside:
            shared.add(id(node))
        for child in _children(node):
            mark(child, inside)

    find(root)
    mark(root, False)
    return frozenset(shared)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, _MAPPING):
        return [n for pair in node.value for n in pair]
    if isinstance(node, _SEQUENCE):
        return list(node.value)
    return []


def line_start(text: str, index: int) -> int:
    return text.rfind("\n", 0, index) + 1


def after_line(text: str, index: int) -> int:
    end = text.find("\n", index)
    return len(text) if end < 0 else end + 1


def content_end(node: yaml.Node, text: str) -> int:
    """Where the node's own text ends. A block collection's end mark is at the next token, past
    blank lines and comments: backed up to the end of its last line with content (the last
    node inside may be an alias, whose marks are its anchor's). A block scalar's (`|`, `>`) is
    past its line breaks; a flow collection's is its bracket; a plain scalar's is its end."""
    if isinstance(node, _MAPPING | _SEQUENCE) and not node.flow_style:
        if not node.value:
            raise NotEditable("empty collection")
        end = int(node.end_mark.index)
        while end > 0:
            start = line_start(text, end)
            line = text[start:end].strip()
            if line and not line.startswith("#"):
                break
            end = start - 1
        return max(end, int(node.start_mark.index))
    end = int(node.end_mark.index)
    if isinstance(node, yaml.ScalarNode) and node.style in ("|", ">"):
        start = int(node.start_mark.index)
        while end > start and text[end - 1] in " \t\r\n":
            end -= 1
    return end


def no_alias(key: yaml.Node, value: yaml.Node) -> None:
    """An alias's node carries its anchor's marks, which are elsewhere in the text."""
    if value.start_mark.index < key.end_mark.index:
        raise NotEditable("an alias where the patch edits")


def flow_span(text: str, start: int, end: int, closing: int) -> tuple[int, int]:
    """The span of one flow entry with its comma: the one after it, else the one before."""
    after = end
    while after < closing and text[after] in " \t\r\n":
        after += 1
    if after < closing and text[after] == ",":
        after += 1
        while after < closing and text[after] in " \t":
            after += 1
        return start, after
    before = start
    while before > 0 and text[before - 1] in " \t\r\n":
        before -= 1
    if before > 0 and text[before - 1] == ",":
        return before - 1, end
    return start, end


def dash_of(text: str, item: yaml.Node) -> int:
    """Where a block sequence item's dash is (`- x`, `-   x`, or `-` alone on its line)."""
    at = item.start_mark.index - 1
    while at >= 0 and text[at] in " \t\r\n":
        at -= 1
    if at < 0 or text[at] != "-":
        raise NotEditable("an unusual sequence item")
    return at


def column_of(text: str, index: int) -> int:
    return index - line_start(text, index)
