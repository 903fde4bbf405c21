"""Rewriting manifests themselves: converted workloads plus the ResourceClaimTemplates they need.

YAML goes through ruamel.yaml's round-trip mode: comments, key order, quoting and document
separators are kept; a comment on a legacy key that is removed goes with it. JSON files are
written back as JSON (key order kept). A file with nothing to convert is left byte for byte, so
converting twice changes nothing.
"""

from __future__ import annotations

import copy
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
from hami_dra_webhook.core.decision import Converted, Refusal, Unchanged, excluded_namespace
from hami_dra_webhook.core.lints import pod_notes
from hami_dra_webhook.core.policy import Policy
from hami_dra_webhook.core.translation_cache import TranslationCache
from hami_dra_webhook.core.types import JsonObject
from hami_dra_webhook.files.embedded import EmbeddedPod, embedded_pods
from hami_dra_webhook.files.fast_yaml import FastSafeLoader
from hami_dra_webhook.files.manifests import pod_template
from hami_dra_webhook.migrate.flow_spacing import keep_flow_spacing
from hami_dra_webhook.migrate.quotas import QuotaReport, dra_quota_ops, quota_report
from hami_dra_webhook.migrate.report import uses_legacy
from hami_dra_webhook.migrate.text_edit import NotEditable, edit_document

# libyaml, when PyYAML has it, and the Python half made faster: reading every document first
# is then cheap.
_FAST_LOADER: Any = FastSafeLoader


@dataclass
class FileResult:
    text: str
    changed: bool
    converted: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    templates: list[str] = field(default_factory=list)
    # Pod templates inside custom resources left as they are (converted at admission), quotas
    # and queues that count legacy resources
    notes: list[str] = field(default_factory=list)


class WrittenWrong(RuntimeError):
    """The converted text does not read back as the converted documents: a defect of convert,
    not of the input. The file is left as it is."""


EMBEDDED_LEFT = (
    "left as it is: its pods are converted when they are created (by the webhook, at"
    " admission); --embedded rewrites it here"
)
BARE_SPEC_LEFT = (
    "a pod spec without a template around it, left as it is even with --embedded (its pods'"
    " labels are not here): its pods are converted when they are created"
)


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
    text: str,
    policy: Policy,
    default_namespace: str | None,
    json_file: bool,
    *,
    embedded: bool = False,
    excluded: frozenset[str] = frozenset(),
    volcano: frozenset[str] = frozenset(),
) -> FileResult:
    """The file converted. `embedded`: pod templates inside custom resources are rewritten too
    (by default they are left, and listed: the webhook converts their pods at admission).
    The workloads of an `excluded` namespace are left, as the webhook leaves their pods."""
    if json_file:
        return _convert_json(text, policy, default_namespace, embedded, excluded, volcano)
    return _convert_yaml(text, policy, default_namespace, embedded, excluded, volcano)


@dataclass
class _Changes:
    """What the translation wants done to the documents of one file."""

    result: FileResult
    existing: set[tuple[str, str]]
    embedded: bool = False
    excluded: frozenset[str] = frozenset()
    volcano: frozenset[str] = frozenset()  # Volcano's schedulers, when its Jobs are converted
    new_templates: list[JsonObject] = field(default_factory=list)
    # Workloads of one kind repeat in a file: each is translated once. Its decisions are
    # shared: never modified (patches are applied by copying, or to a deep copy of the ops).
    cache: TranslationCache = field(default_factory=lambda: TranslationCache(from_yaml=True))

    def workload(
        self, document: Any, policy: Policy, default_namespace: str | None
    ) -> list[patch.PatchOp]:
        """The patch for one workload document (empty: leave it), recording what it needs."""
        if not isinstance(document, dict):
            return []
        metadata = document.get("metadata") or {}
        title = f"{document.get('kind')}/{metadata.get('name') or metadata.get('generateName')}"
        namespace = metadata.get("namespace") or default_namespace
        namespace = str(namespace) if namespace else None
        found = pod_template(document)
        left = excluded_namespace(namespace, self.excluded)
        if found is not None:
            self.result.notes += [f"{title}: {w}" for w in pod_notes(found[1], policy)]
            if left is not None and uses_legacy(found[1], policy):
                self.result.notes.append(f"{title}: {left.left_alone}")
                return []
            return self._template(title, found[0], found[1], policy, namespace)
        quota = quota_report(document, policy, "", namespace or "")
        if quota is not None:
            return self._quota(title, document, quota)
        ops: list[patch.PatchOp] = []
        for inside in embedded_pods(document, self.volcano):
            where = f"{title} {inside.where}"
            self.result.notes += [f"{where}: {w}" for w in pod_notes(inside.pod, policy)]
            if not uses_legacy(inside.pod, policy):
                continue
            # Judged as its controller creates the pods (a Volcano Job's take its scheduler);
            # from the cache, which _template asks again.
            decision = left or self.cache.decide(inside.admitted, policy, namespace)
            if isinstance(decision, Unchanged) and decision.left_alone:
                why = f"{inside.inherited}, so they are" if inside.inherited else "its pods are"
                self.result.notes.append(f"{where}: {why} {decision.left_alone}")
                continue
            if self.embedded and not inside.bare and not inside.left:
                mine = self._template(
                    where, inside.path, inside.admitted, policy, namespace, inside
                )
                if inside.inherits_scheduler:  # the owner's, not the template's, to remove
                    mine = [op for op in mine if not op["path"].endswith("/spec/schedulerName")]
                ops += mine
                continue
            if isinstance(decision, Refusal):
                self.result.refused.append(f"{where}: its pods will be refused: {decision.message}")
            elif inside.left or inside.bare:
                self.result.notes.append(f"{where}: {inside.left or BARE_SPEC_LEFT}")
            else:
                self.result.notes.append(f"{where}: {EMBEDDED_LEFT}")
        return ops

    def _quota(self, title: str, document: JsonObject, quota: QuotaReport) -> list[patch.PatchOp]:
        ops = dra_quota_ops(document, quota)
        if ops:
            self.result.converted.append(title)
        keys = [*quota.dra_form, *(k for entries in quota.sections.values() for k in entries)]
        if quota.kueue_mapping is not None:
            keys.append(f"deviceClassMappings {quota.kueue_mapping}")
        added = f"; added {', '.join(keys)}" if ops else ""
        self.result.notes.append(f"{title} counts {', '.join(quota.counted)}: {quota.stops}{added}")
        return ops

    def _template(
        self,
        title: str,
        path: tuple[str | int, ...],
        pod: JsonObject,
        policy: Policy,
        namespace: str | None,
        inside: EmbeddedPod | None = None,
    ) -> list[patch.PatchOp]:
        """The patch of one pod template at `path` (of `inside`, a template in a custom
        resource, where it says)."""
        translation = self.cache.decide(pod, policy, namespace)
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
        if inside is not None:
            return inside.in_object(translation.patch)
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


def _convert_json(
    text: str,
    policy: Policy,
    default_namespace: str | None,
    embedded: bool,
    excluded: frozenset[str],
    volcano: frozenset[str],
) -> FileResult:
    top = json.loads(text)
    existing = _existing_templates(_workloads(top))
    changes = _Changes(FileResult(text=text, changed=False), existing, embedded, excluded, volcano)
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


def _convert_yaml(
    text: str,
    policy: Policy,
    default_namespace: str | None,
    embedded: bool,
    excluded: frozenset[str],
    volcano: frozenset[str],
) -> FileResult:
    """Each document is read with libyaml first; only those that change go through ruamel's
    (slow, pure-Python) round trip. The others are kept byte for byte."""
    segments = _segments(text)
    parsed = [list(yaml.load_all(segment, Loader=_FAST_LOADER)) for segment in segments]
    documents = [d for docs in parsed for d in docs if d is not None]
    changes = _Changes(
        FileResult(text=text, changed=False),
        _existing_templates(documents),
        embedded,
        excluded,
        volcano,
    )
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
        for document in loaded:
            _unshare(document, set())
        for document, per_workload in zip(loaded, edits[index], strict=True):
            for workload, ops in zip(_workloads(document), per_workload, strict=True):
                # In place: the round-trip maps and lists keep their comments and order.
                # The ops' values are copied: jsonpatch puts them in by reference, and a later
                # op may add inside one (the ops may be a cached decision's).
                jsonpatch.apply_patch(workload, copy.deepcopy(ops), in_place=True)
        dumped = io.StringIO()
        round_trip.explicit_start = segment.lstrip().startswith("---")
        round_trip.dump_all(loaded, dumped)
        # An edit in place is read back already (text_edit); a round trip is read back here.
        present = [d for d in parsed[index] if d is not None]
        expected = [_patched(d, ops) for d, ops in zip(present, edits[index], strict=True)]
        written = keep_flow_spacing(segment, dumped.getvalue())
        _check_reads_back(written, expected)
        out.append(written)
    body = "".join(out)
    if changes.new_templates:
        if body and not body.endswith("\n"):
            body += "\n"
        dumped = io.StringIO()
        round_trip.explicit_start = True
        round_trip.dump_all(changes.new_templates, dumped)
        _check_reads_back(dumped.getvalue(), changes.new_templates)
        body += dumped.getvalue()
    result.text = body
    return result


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
    workloads = _workloads(document)
    if workloads == [document]:
        return patch.apply(document, per_workload[0]) if per_workload[0] else document
    items = [
        patch.apply(w, ops) if ops else w for w, ops in zip(workloads, per_workload, strict=True)
    ]
    return {**document, "items": items} if items else document


def _check_reads_back(text: str, expected: list[Any]) -> None:
    try:
        written = [d for d in yaml.load_all(text, Loader=_FAST_LOADER) if d is not None]
    except yaml.YAMLError as error:
        raise WrittenWrong(f"the converted text is not valid YAML: {error}") from error
    if written != expected:
        raise WrittenWrong("the converted text does not read back as the converted objects")


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
