"""PyYAML's safe loader and dumper (libyaml's where PyYAML has it), faster on plain data and
exactly the same in what they read and write.

Reading 20,000 pods, most of the time went to PyYAML's Python half: resolving each scalar's
tag (a list of regular expressions per scalar, and twice per scalar when dumping), and
constructing and representing objects one generator or method lookup at a time. Here:
- `resolve` remembers its answers (a bounded table): the safe resolver has no path resolvers,
  so a scalar's tag depends only on its text and how it was written;
- a document of plain data (maps, lists, strings, integers, floats, booleans and nulls, each
  node met once) is built by one recursive function; anything else (aliases, merge keys,
  timestamps, binary, sets, explicit tags, unhashable keys) by PyYAML's constructor, the whole
  document again, with its own errors;
- exact dicts (keys in their order), lists, strings, integers, booleans and None are
  represented by one function that makes the nodes SafeRepresenter makes; anything else by
  SafeRepresenter.

`tests/migrate/test_fast_yaml.py` checks both against PyYAML's own classes.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_BaseDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

STR: Final = "tag:yaml.org,2002:str"
INT: Final = "tag:yaml.org,2002:int"
FLOAT: Final = "tag:yaml.org,2002:float"
BOOL: Final = "tag:yaml.org,2002:bool"
NULL: Final = "tag:yaml.org,2002:null"
MAP: Final = "tag:yaml.org,2002:map"
SEQ: Final = "tag:yaml.org,2002:seq"
# Distinct scalars whose tags are remembered; past it the table starts again.
_MOST_REMEMBERED: Final = 1 << 16


class _NotPlain(Exception):
    """The document holds something the fast construction leaves to PyYAML."""


class _RememberingResolver:
    """`resolve` with its answers for scalars remembered (mixed into a loader or dumper whose
    resolver has no path resolvers: then the answer depends only on the arguments). The table
    is the class's: PyYAML makes a loader for each document."""

    _tags: ClassVar[dict[tuple[str, bool, bool], str]]

    def resolve(self, kind: type[Node], value: Any, implicit: tuple[bool, bool]) -> str:
        if kind is not ScalarNode:
            return super().resolve(kind, value, implicit)  # type: ignore[misc, no-any-return]
        key = (value, implicit[0], implicit[1])
        tags = self._tags
        tag = tags.get(key)
        if tag is None:
            tag = super().resolve(kind, value, implicit)  # type: ignore[misc]
            if len(tags) >= _MOST_REMEMBERED:
                tags.clear()
            tags[key] = tag
        return tag


class FastSafeLoader(_RememberingResolver, _BaseLoader):  # type: ignore[misc]
    _tags: ClassVar[dict[tuple[str, bool, bool], str]] = {}

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        if self.yaml_path_resolvers:  # pragma: no cover (the safe resolver has none)
            raise TypeError("FastSafeLoader needs a resolver without path resolvers")

    def construct_document(self, node: Node) -> Any:
        try:
            return self._plain(node, set())
        except _NotPlain:
            return super().construct_document(node)

    def _plain(self, node: Node, seen: set[int]) -> Any:
        """The value of a node of plain data; `seen`: the collection nodes met so far (one met
        again is an alias: left to PyYAML, which shares the object)."""
        kind, tag = type(node), node.tag
        if kind is ScalarNode:
            value = node.value
            if tag == STR:
                return value
            if tag == INT:
                if value.isascii() and value.isdigit() and (value[0] != "0" or value == "0"):
                    return int(value)
                return self.construct_yaml_int(node)
            if tag == NULL:
                return None
            if tag == BOOL:
                return self.bool_values[value.lower()]
            if tag == FLOAT:
                return self.construct_yaml_float(node)
            raise _NotPlain
        if id(node) in seen:
            raise _NotPlain
        seen.add(id(node))
        if kind is MappingNode and tag == MAP:
            mapping: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                if type(key_node) is not ScalarNode or key_node.tag not in _PLAIN_KEYS:
                    raise _NotPlain  # merge keys, and keys that may not hash
                mapping[self._plain(key_node, seen)] = self._plain(value_node, seen)
            return mapping
        if kind is SequenceNode and tag == SEQ:
            return [self._plain(item, seen) for item in node.value]
        raise _NotPlain


_PLAIN_KEYS: Final = frozenset((STR, INT, FLOAT, BOOL, NULL))


class FastSafeDumper(_RememberingResolver, _BaseDumper):  # type: ignore[misc]
    """A safe dumper that never writes aliases, with exact plain types represented fast."""

    _tags: ClassVar[dict[tuple[str, bool, bool], str]] = {}

    def ignore_aliases(self, data: Any) -> bool:
        return True

    def represent_data(self, data: Any) -> Node:
        kind = type(data)
        if kind is str:
            return ScalarNode(STR, data, style=self.default_style)
        if kind is dict and not self.sort_keys:
            pairs = [(self.represent_data(k), self.represent_data(v)) for k, v in data.items()]
            return MappingNode(MAP, pairs, flow_style=self._flow_style(pairs))
        if kind is list:
            items = [self.represent_data(item) for item in data]
            return SequenceNode(SEQ, items, flow_style=self._flow_style_of(items))
        if kind is bool:
            return ScalarNode(BOOL, "true" if data else "false", style=self.default_style)
        if kind is int:
            return ScalarNode(INT, str(data), style=self.default_style)
        if data is None:
            return ScalarNode(NULL, "null", style=self.default_style)
        node: Node = super().represent_data(data)
        return node

    def _flow_style(self, pairs: list[tuple[Node, Node]]) -> bool:
        """As SafeRepresenter.represent_mapping decides it (sort_keys off)."""
        if self.default_flow_style is not None:
            return bool(self.default_flow_style)
        return all(_plain_scalar(k) and _plain_scalar(v) for k, v in pairs)

    def _flow_style_of(self, items: list[Node]) -> bool:
        if self.default_flow_style is not None:
            return bool(self.default_flow_style)
        return all(_plain_scalar(item) for item in items)


def _plain_scalar(node: Node) -> bool:
    return isinstance(node, ScalarNode) and not node.style


# What `dump_block` writes: block style, keys in their order, `---` before each document.
BLOCK_OPTIONS: Final[dict[str, Any]] = {
    "sort_keys": False,
    "default_flow_style": False,
    "allow_unicode": True,
    "explicit_start": True,
    "width": 1 << 16,
}
# Characters of a string written without PyYAML's scalar analysis (libyaml's emitter writes
# such a string plain, or single-quoted where it reads as another type); others leave the
# document to PyYAML.
# `:` only inside a word (in block context, where these are written, `: ` and a last `:` are
# what make it an indicator).
_SAFE_CHARACTERS: Final = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./ :"
)
_SAFE_FIRST: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/")
_LONGEST_KEY: Final = 120  # libyaml writes a key over 128 characters as a complex key
_LONGEST_VALUE: Final = 4096  # far under the line width


class _NotSimple(Exception):
    """The document holds a value `dump_block` leaves to PyYAML."""


def dump_block(documents: list[Any]) -> str:
    """`yaml.dump_all(documents, Dumper=FastSafeDumper, **BLOCK_OPTIONS)`, the same text: a
    document of maps and lists (the root one of them, not empty) of strings, integers,
    booleans and None written here, any other by PyYAML."""
    dumper_tags = _Tags()
    out: list[str] = []
    for document in documents:
        try:
            if type(document) not in (dict, list) or not document:
                raise _NotSimple
            lines: list[str] = []
            _collection(document, 0, lines, dumper_tags)
            out.append("---\n")
            out.append("\n".join(lines))
            out.append("\n")
        except _NotSimple:
            out.append(yaml.dump(document, Dumper=FastSafeDumper, **BLOCK_OPTIONS))
    return "".join(out)


class _Tags:
    """The implicit tag of a plain scalar, as the dumper resolves it (remembered)."""

    def __init__(self) -> None:
        self._resolver = yaml.resolver.Resolver()
        self._tags: dict[str, str] = {}

    def of(self, value: str) -> str:
        tag = self._tags.get(value)
        if tag is None:
            tag = self._resolver.resolve(ScalarNode, value, (True, False))  # type: ignore[no-untyped-call]
            if len(self._tags) >= _MOST_REMEMBERED:
                self._tags.clear()
            self._tags[value] = tag
        return tag


def _scalar(value: Any, tags: _Tags, longest: int) -> str:
    kind = type(value)
    if kind is str:
        if (
            not value
            or len(value) > longest
            or value[0] not in _SAFE_FIRST
            or value[-1] in " :"
            or not _SAFE_CHARACTERS.issuperset(value)
            or ": " in value
        ):
            if value == "":
                return "''"
            raise _NotSimple
        return value if tags.of(value) == STR else f"'{value}'"
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    if value is None:
        return "null"
    raise _NotSimple


def _collection(value: Any, indent: int, lines: list[str], tags: _Tags) -> None:
    """The lines of a non-empty map or list at `indent` (a list inside a map is written at
    the map's indent, as PyYAML writes it)."""
    pad = " " * indent
    if type(value) is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise _NotSimple
            head = f"{pad}{_scalar(key, tags, _LONGEST_KEY)}:"
            kind = type(item)
            if kind is dict or kind is list:
                if not item:
                    lines.append(f"{head} {{}}" if kind is dict else f"{head} []")
                else:
                    lines.append(head)
                    _collection(item, indent + 2 if kind is dict else indent, lines, tags)
            else:
                lines.append(f"{head} {_scalar(item, tags, _LONGEST_VALUE)}")
        return
    if type(value) is not list:
        raise _NotSimple
    for item in value:
        kind = type(item)
        if kind is dict or kind is list:
            if not item:
                lines.append(f"{pad}- {{}}" if kind is dict else f"{pad}- []")
                continue
            first = len(lines)
            _collection(item, indent + 2, lines, tags)
            lines[first] = f"{pad}- {lines[first][indent + 2 :]}"
        else:
            lines.append(f"{pad}- {_scalar(item, tags, _LONGEST_VALUE)}")
