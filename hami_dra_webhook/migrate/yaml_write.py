"""Writing a converted YAML file: a document edited in place where text_edit can, else through
ruamel's round trip (comments and order kept, aliases unshared), and every written document read
back and compared with what it must be (`WrittenWrong` when it is not: a defect of convert, not
of the input)."""

from __future__ import annotations

import copy
import io
import itertools
import re
from typing import Any

import jsonpatch
import yaml
from ruamel.yaml import YAML

from hami_dra_webhook.core.model import patch
from hami_dra_webhook.files.fast_yaml import FastSafeLoader
from hami_dra_webhook.migrate.flow_spacing import keep_flow_spacing
from hami_dra_webhook.migrate.text_edit import NotEditable, edit_document

# libyaml, when PyYAML has it, and the Python half made faster: reading every document first
# is then cheap.
FAST_LOADER: Any = FastSafeLoader
# A document marker at the start of a line ends any scalar (YAML 1.2), so splitting here is safe.
_DOCUMENT_START = re.compile(r"^---(?=[ \t]|\r?$)", re.MULTILINE)
# For each document of a segment, for each of its workloads, the patch to apply.
SegmentEdits = list[list[list[patch.PatchOp]]]


class WrittenWrong(RuntimeError):
    """The converted text does not read back as the converted documents: a defect of convert,
    not of the input. The file is left as it is."""


def round_trip_yaml(text: str = "") -> YAML:
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096
    mapping, offset = guess_indent(text)
    yaml.indent(mapping=mapping, sequence=offset + 2, offset=offset)
    return yaml


def guess_indent(text: str) -> tuple[int, int]:
    """(mapping indent, dash offset of list items) as the file writes them; (2, 0) if unknown."""
    mapping, offset = 0, -1
    lines = [
        line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]
    for line, following in itertools.pairwise(lines):
        if not line.rstrip().endswith(":"):
            continue
        here = len(line) - len(line.lstrip()) + (2 if line.lstrip().startswith("- ") else 0)
        there = len(following) - len(following.lstrip())
        if following.lstrip().startswith("- ") and offset < 0 and there >= here:
            offset = there - here
        elif there > here and not mapping:
            mapping = there - here
        if mapping and offset >= 0:
            break
    return mapping or 2, max(offset, 0)


def workloads_of(document: Any) -> list[Any]:
    """The document itself, or the items of a List (nested Lists included)."""
    if isinstance(document, dict) and str(document.get("kind", "")).endswith("List"):
        items = document.get("items")
        return [w for item in items for w in workloads_of(item)] if isinstance(items, list) else []
    return [document]


def segments_of(text: str) -> list[str]:
    """The file's text cut before each `---` line: joined again, they are the text itself."""
    cuts = [m.start() for m in _DOCUMENT_START.finditer(text) if m.start() > 0]
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if a < b]


def _unshare(node: Any, seen: set[int]) -> None:
    """Give every alias its own copy: a patch to an anchored map (`labels: &l`) must not reach
    the places that name it (`annotations: *l`). What is copied is written out in full."""
    if isinstance(node, dict):
        entries: Any = list(node.items())
    elif isinstance(node, list):
        entries = list(enumerate(node))
    else:
        return
    for key, value in entries:
        if not isinstance(value, dict | list):
            continue
        own = copy.deepcopy(value) if id(value) in seen else value
        node[key] = own
        seen.add(id(own))
        _unshare(own, seen)


def _patched(document: Any, per_workload: list[list[patch.PatchOp]]) -> Any:
    """The document with each of its workloads' patches applied (a List's items each)."""
    ops = document_ops(document, per_workload)
    return patch.apply(document, ops) if ops else document


def document_ops(document: Any, per_workload: list[list[patch.PatchOp]]) -> list[patch.PatchOp]:
    """The workloads' patches as one patch of the document (a List's items at their place)."""
    prefixes = workload_pointers(document)
    return [
        op
        for prefix, ops in zip(prefixes, per_workload, strict=True)
        for op in (patch.rebase(ops, prefix) if prefix else ops)
    ]


def _check_reads_back(text: str, expected: list[Any]) -> None:
    try:
        written = [d for d in yaml.load_all(text, Loader=FAST_LOADER) if d is not None]
    except yaml.YAMLError as error:
        raise WrittenWrong(f"the converted text is not valid YAML: {error}") from error
    if written != expected:
        raise WrittenWrong("the converted text does not read back as the converted objects")


def edited_text(
    segment: str,
    documents: list[Any],
    edits: SegmentEdits,
    indent: tuple[int, int],
) -> str | None:
    """The segment edited in place (text_edit), or None where it needs the round trip."""
    present = [d for d in documents if d is not None]
    if len(present) != 1:
        return None  # several documents in one segment (`...` between them)
    document = present[0]
    ops = document_ops(document, edits[0])
    try:
        return edit_document(segment, ops, patch.apply(document, ops), indent)
    except NotEditable:
        return None


def workload_pointers(document: Any, prefix: str = "") -> list[str]:
    """The JSON pointer of each of `workloads_of(document)`, in the same order."""
    if isinstance(document, dict) and str(document.get("kind", "")).endswith("List"):
        items = document.get("items")
        if not isinstance(items, list):
            return []
        return [
            pointer
            for index, item in enumerate(items)
            for pointer in workload_pointers(item, f"{prefix}/items/{index}")
        ]
    return [prefix]


def round_trip_segment(
    round_trip: YAML, segment: str, parsed: list[Any], edits: SegmentEdits
) -> str:
    """The segment's documents patched through ruamel's round trip, read back and checked."""
    loaded = [d for d in round_trip.load_all(segment) if d is not None]
    for document in loaded:
        _unshare(document, set())
    for document, per_workload in zip(loaded, edits, strict=True):
        for workload, ops in zip(workloads_of(document), per_workload, strict=True):
            # In place: the round-trip maps and lists keep their comments and order.
            # The ops' values are copied: jsonpatch puts them in by reference, and a later
            # op may add inside one (the ops may be a cached decision's).
            jsonpatch.apply_patch(workload, copy.deepcopy(ops), in_place=True)
    dumped = io.StringIO()
    round_trip.explicit_start = segment.lstrip().startswith("---")
    round_trip.dump_all(loaded, dumped)
    # An edit in place is read back already (text_edit); a round trip is read back here.
    present = [d for d in parsed if d is not None]
    expected = [_patched(d, ops) for d, ops in zip(present, edits, strict=True)]
    written = keep_flow_spacing(segment, dumped.getvalue())
    _check_reads_back(written, expected)
    return written


def with_templates(body: str, round_trip: YAML, templates: list[Any]) -> str:
    """The file's text with the new templates appended as documents of their own."""
    if body and not body.endswith("\n"):
        body += "\n"
    dumped = io.StringIO()
    round_trip.explicit_start = True
    round_trip.dump_all(templates, dumped)
    _check_reads_back(dumped.getvalue(), templates)
    return body + dumped.getvalue()
