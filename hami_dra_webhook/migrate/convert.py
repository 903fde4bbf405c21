"""Rewriting manifests themselves: converted workloads plus the ResourceClaimTemplates they need.

YAML goes through ruamel.yaml's round-trip mode: comments, key order, quoting and document
separators are kept; a comment on a legacy key that is removed goes with it. JSON files are
written back as JSON (key order kept). A file with nothing to convert is left byte for byte, so
converting twice changes nothing.
"""

from __future__ import annotations

import io
import itertools
import json
import re
from dataclasses import dataclass, field
from typing import Any

import jsonpatch
import yaml
from ruamel.yaml import YAML

from hami_dra_webhook.core import patch
from hami_dra_webhook.core.decision import Converted, Refusal
from hami_dra_webhook.core.policy import Policy
from hami_dra_webhook.core.translate import translate_pod
from hami_dra_webhook.core.types import JsonObject
from hami_dra_webhook.files.manifests import pod_template
from hami_dra_webhook.migrate.text_edit import NotEditable, edit_document

# libyaml, when PyYAML has it: reading every document first is then cheap.
_FAST_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass
class FileResult:
    text: str
    changed: bool
    converted: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    templates: list[str] = field(default_factory=list)


def _yaml(text: str = "") -> YAML:
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


def _workloads(document: Any) -> list[Any]:
    """The document itself, or the items of a List (nested Lists included)."""
    if isinstance(document, dict) and str(document.get("kind", "")).endswith("List"):
        items = document.get("items")
        return [w for item in items for w in _workloads(item)] if isinstance(items, list) else []
    return [document]


def convert_text(
    text: str, policy: Policy, default_namespace: str | None, json_file: bool
) -> FileResult:
    if json_file:
        return _convert_json(text, policy, default_namespace)
    return _convert_yaml(text, policy, default_namespace)


@dataclass
class _Changes:
    """What the translation wants done to the documents of one file."""

    result: FileResult
    existing: set[tuple[str, str]]
    new_templates: list[JsonObject] = field(default_factory=list)

    def workload(
        self, document: Any, policy: Policy, default_namespace: str | None
    ) -> list[patch.PatchOp]:
        """The patch for one workload document (empty: leave it), recording what it needs."""
        found = pod_template(document)
        if found is None:
            return []
        path, pod = found
        metadata = document.get("metadata") or {}
        title = f"{document.get('kind')}/{metadata.get('name') or metadata.get('generateName')}"
        namespace = metadata.get("namespace") or default_namespace
        translation = translate_pod(pod, policy, str(namespace) if namespace else None)
        if isinstance(translation, Refusal):
            self.result.refused.append(f"{title}: {translation.message}")
        if not isinstance(translation, Converted):
            return []
        self.result.converted.append(title)
        for template in translation.templates:
            key = (str(template["metadata"].get("namespace", "")), template["metadata"]["name"])
            if key not in self.existing:
                self.existing.add(key)
                self.new_templates.append(json.loads(json.dumps(template)))
                self.result.templates.append(key[1])
        return patch.rebase(translation.patch, patch.pointer(*path)) if path else translation.patch


def _existing_templates(documents: list[Any]) -> set[tuple[str, str]]:
    return {
        (
            str((d.get("metadata") or {}).get("namespace", "")),
            str((d.get("metadata") or {}).get("name", "")),
        )
        for d in documents
        if isinstance(d, dict) and d.get("kind") == "ResourceClaimTemplate"
    }


def _convert_json(text: str, policy: Policy, default_namespace: str | None) -> FileResult:
    top = json.loads(text)
    changes = _Changes(FileResult(text=text, changed=False), _existing_templates(_workloads(top)))
    for document in _workloads(top):
        jsonpatch.apply_patch(
            document, changes.workload(document, policy, default_namespace), in_place=True
        )
    result = changes.result
    if not result.converted and not changes.new_templates:
        return result
    result.changed = True
    if str(top.get("kind", "")).endswith("List") and isinstance(top.get("items"), list):
        top["items"] += changes.new_templates
    elif changes.new_templates:
        top = {"apiVersion": "v1", "kind": "List", "items": [top, *changes.new_templates]}
    result.text = json.dumps(top, indent=2) + "\n"
    return result


# A document marker at the start of a line ends any scalar (YAML 1.2), so splitting here is safe.
_DOCUMENT_START = re.compile(r"^---(?=[ \t]|$)", re.MULTILINE)


def _segments(text: str) -> list[str]:
    """The file's text cut before each `---` line: joined again, they are the text itself."""
    cuts = [m.start() for m in _DOCUMENT_START.finditer(text) if m.start() > 0]
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if a < b]


def _convert_yaml(text: str, policy: Policy, default_namespace: str | None) -> FileResult:
    """Each document is read with libyaml first; only those that change go through ruamel's
    (slow, pure-Python) round trip. The others are kept byte for byte."""
    segments = _segments(text)
    parsed = [list(yaml.load_all(segment, Loader=_FAST_LOADER)) for segment in segments]
    documents = [d for docs in parsed for d in docs if d is not None]
    changes = _Changes(FileResult(text=text, changed=False), _existing_templates(documents))
    # segment -> for each of its documents, for each of its workloads, the patch to apply
    edits: dict[int, list[list[list[patch.PatchOp]]]] = {}
    for index, docs in enumerate(parsed):
        per_document = [
            [changes.workload(w, policy, default_namespace) for w in _workloads(d)]
            for d in docs
            if d is not None
        ]
        if any(ops for workloads in per_document for ops in workloads):
            edits[index] = per_document
    result = changes.result
    if not edits and not changes.new_templates:
        return result
    result.changed = True
    round_trip = _yaml(text)
    indent = guess_indent(text)
    out = []
    for index, segment in enumerate(segments):
        if index not in edits:
            out.append(segment)
            continue
        fast = _edited_text(segment, parsed[index], edits[index], indent)
        if fast is not None:
            out.append(fast)
            continue
        loaded = [d for d in round_trip.load_all(segment) if d is not None]
        for document, per_workload in zip(loaded, edits[index], strict=True):
            for workload, ops in zip(_workloads(document), per_workload, strict=True):
                # In place: the round-trip maps and lists keep their comments and order.
                jsonpatch.apply_patch(workload, ops, in_place=True)
        dumped = io.StringIO()
        round_trip.explicit_start = segment.lstrip().startswith("---")
        round_trip.dump_all(loaded, dumped)
        out.append(dumped.getvalue())
    body = "".join(out)
    if changes.new_templates:
        if body and not body.endswith("\n"):
            body += "\n"
        dumped = io.StringIO()
        round_trip.explicit_start = True
        round_trip.dump_all(changes.new_templates, dumped)
        body += dumped.getvalue()
    result.text = body
    return result


def _edited_text(
    segment: str,
    documents: list[Any],
    edits: list[list[list[patch.PatchOp]]],
    indent: tuple[int, int],
) -> str | None:
    """The segment edited in place (text_edit), or None where it needs the round trip."""
    present = [d for d in documents if d is not None]
    if len(present) != 1 or len(edits[0]) != 1 or _workloads(present[0]) != [present[0]]:
        return None  # several documents, or a List of workloads
    ops = edits[0][0]
    try:
        return edit_document(segment, ops, patch.apply(present[0], ops), indent)
    except NotEditable:
        return None
