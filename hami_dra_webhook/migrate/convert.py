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
from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml import YAML

from hami_dra_webhook.core import patch
from hami_dra_webhook.core.policy import Policy
from hami_dra_webhook.core.translate import translate_pod
from hami_dra_webhook.manifests import pod_template


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
        documents: list[Any] = [json.loads(text)]
    else:
        documents = [d for d in _yaml(text).load_all(text) if d is not None]
    result = FileResult(text=text, changed=False)
    existing = {
        (
            str((d.get("metadata") or {}).get("namespace", "")),
            str((d.get("metadata") or {}).get("name", "")),
        )
        for d in documents
        if isinstance(d, dict) and d.get("kind") == "ResourceClaimTemplate"
    }
    new_templates = []
    for document in [w for d in documents for w in _workloads(d)]:
        found = pod_template(document)
        if found is None:
            continue
        path, pod = found
        metadata = document.get("metadata") or {}
        title = f"{document.get('kind')}/{metadata.get('name') or metadata.get('generateName')}"
        namespace = metadata.get("namespace") or default_namespace
        translation = translate_pod(
            json.loads(json.dumps(pod)), policy, str(namespace) if namespace else None
        )
        if translation.outcome == "refused":
            result.refused.append(f"{title}: {translation.message}")
        if translation.outcome != "converted":
            continue
        apply_in_place(
            document,
            patch.rebase(translation.patch, patch.pointer(*path)) if path else translation.patch,
        )
        result.converted.append(title)
        for template in translation.templates:
            key = (str(template["metadata"].get("namespace", "")), template["metadata"]["name"])
            if key not in existing:
                existing.add(key)
                new_templates.append(json.loads(json.dumps(template)))
                result.templates.append(key[1])
    if not result.converted and not new_templates:
        return result
    result.changed = True
    if json_file:
        top = documents[0]
        if str(top.get("kind", "")).endswith("List") and isinstance(top.get("items"), list):
            top["items"] += new_templates
        elif new_templates:
            top = {"apiVersion": "v1", "kind": "List", "items": [top, *new_templates]}
        result.text = json.dumps(top, indent=2) + "\n"
        return result
    out = io.StringIO()
    explicit_start = text.lstrip().startswith("---")
    yaml = _yaml(text)
    yaml.explicit_start = explicit_start or len(documents) + len(new_templates) > 1
    yaml.dump_all([*documents, *new_templates], out)
    result.text = out.getvalue()
    return result


def apply_in_place(document: Any, ops: list[patch.PatchOp]) -> None:
    """Apply the translation's add/remove operations to a round-trip document, in place, so that
    everything the operations do not touch (comments included) stays as it was."""
    for op in ops:
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in op["path"].split("/")[1:]]
        node = document
        for token in tokens[:-1]:
            node = node[int(token)] if isinstance(node, list) else node[token]
        last = tokens[-1]
        if op["op"] == "remove":
            del node[int(last) if isinstance(node, list) else last]
        elif isinstance(node, list):
            if last == "-":
                node.append(op["value"])
            else:
                node.insert(int(last), op["value"])
        else:
            node[last] = op["value"]
