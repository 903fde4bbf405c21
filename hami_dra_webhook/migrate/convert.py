"""Rewriting manifests themselves: converted workloads plus the ResourceClaimTemplates they need.

YAML is edited as text (migrate/text_edit.py): outside the lines a conversion must change, a file
comes out byte for byte (comments, quoting, line breaks, indentation, flow maps, trailing spaces,
document markers, line endings); a comment among the legacy keys removed goes with them. Only a
document the editor cannot change so (an anchor on the edited path) goes through ruamel.yaml's
round trip, which keeps comments and key order but not the rest. JSON files are
written back as JSON (key order kept). A file with nothing to convert is left byte for byte, so
converting twice changes nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import yaml

from hami_dra_webhook.admission.admitted import AdmissionRules, Judgement
from hami_dra_webhook.core.model import patch
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.outcome.decision import Converted, Refusal, Unchanged
from hami_dra_webhook.core.review.translation_cache import TranslationCache
from hami_dra_webhook.files.manifests import ManifestError, may_alias, pod_template, too_large
from hami_dra_webhook.migrate.quotas import QuotaReport, dra_quota_ops, quota_report
from hami_dra_webhook.migrate.text_edit import NotEditable, edit_document
from hami_dra_webhook.migrate.yaml_write import (
    FAST_LOADER,
    SegmentEdits,
    document_ops,
    edited_text,
    guess_indent,
    round_trip_segment,
    round_trip_yaml,
    segments_of,
    with_templates,
    workloads_of,
)


@dataclass
class FileResult:
    text: str
    changed: bool
    converted: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    templates: list[str] = field(default_factory=list)
    # What the webhook would warn of the converted pods (the same words; `where: warning`)
    warnings: list[str] = field(default_factory=list)
    # Pod templates inside custom resources left as they are (converted at admission), quotas
    # and queues that count legacy resources
    notes: list[str] = field(default_factory=list)


EMBEDDED_LEFT = (
    "left as it is: its pods are converted when they are created (by the webhook, at"
    " admission); --embedded rewrites it here"
)
BARE_SPEC_LEFT = (
    "a pod spec without a template around it, left as it is even with --embedded (its pods'"
    " labels are not here): its pods are converted when they are created"
)


def convert_text(
    text: str,
    rules: AdmissionRules,
    default_namespace: str | None,
    json_file: bool,
    *,
    embedded: bool = False,
) -> FileResult:
    """The file converted as the webhook, under `rules`, converts its pods (the workloads it
    leaves are left, and said). `embedded`: pod templates inside custom resources are rewritten
    too (by default they are left, and listed: the webhook converts their pods at admission)."""
    changes = _Changes(FileResult(text=text, changed=False), rules, embedded)
    if json_file:
        return _convert_json(text, changes, default_namespace)
    return _convert_yaml(text, changes, default_namespace)


@dataclass
class _Changes:
    """What the translation wants done to the documents of one file."""

    result: FileResult
    rules: AdmissionRules
    embedded: bool = False
    existing: set[tuple[str, str]] = field(default_factory=set)
    new_templates: list[JsonObject] = field(default_factory=list)
    # Workloads of one kind repeat in a file: each is translated once. Its decisions are
    # shared: never modified (patches are applied by copying, or to a deep copy of the ops).
    cache: TranslationCache = field(default_factory=lambda: TranslationCache(from_yaml=True))

    def workload(self, document: Any, default_namespace: str | None) -> list[patch.PatchOp]:
        """The patch for one workload document (empty: leave it), recording what it needs."""
        if not isinstance(document, dict):
            return []
        metadata = document.get("metadata") or {}
        title = f"{document.get('kind')}/{metadata.get('name') or metadata.get('generateName')}"
        namespace = metadata.get("namespace") or default_namespace
        namespace = str(namespace) if namespace else None
        if pod_template(document) is None:
            quota = quota_report(document, self.rules.policy, "", namespace or "")
            if quota is not None:
                return self._quota(title, document, quota)
        ops: list[patch.PatchOp] = []
        for judgement in self.rules.templates(document, namespace, self.cache.decide).items:
            where = f"{title} {judgement.where}" if judgement.where else title
            self.result.notes += [f"{where}: {w}" for w in judgement.notes]
            if judgement.legacy:
                ops += [op for op in self._template(where, judgement) if op not in ops]
        return ops

    def _template(self, where: str, judgement: Judgement) -> list[patch.PatchOp]:
        """The patch of one pod template (empty: left), recording what it needs."""
        decision, inside = judgement.decision, judgement.inside
        if isinstance(decision, Unchanged) and decision.left_alone:
            inherited = inside.inherited if inside is not None else ""
            why = f"{inherited}, so they are " if inherited else ""
            self.result.notes.append(f"{where}: {why}{decision.left_alone}")
            return []
        if inside is not None and not (self.embedded and judgement.rewritable):
            if isinstance(decision, Refusal):
                self.result.refused.append(f"{where}: its pods will be refused: {decision.message}")
            elif inside.left or inside.bare:
                self.result.notes.append(f"{where}: {inside.left or BARE_SPEC_LEFT}")
            else:
                self.result.notes.append(f"{where}: {EMBEDDED_LEFT}")
            return []
        if isinstance(decision, Refusal):
            self.result.refused.append(f"{where}: {decision.message}")
        if not isinstance(decision, Converted):
            return []
        self.result.converted.append(where)
        said = set(decision.summaries)
        for warning in decision.warnings:
            if warning not in said:
                self.result.warnings.append(f"{where}: {warning}")
        for template in decision.templates:
            key = (str(template["metadata"].get("namespace", "")), template["metadata"]["name"])
            if key not in self.existing:
                self.existing.add(key)
                self.new_templates.append(json.loads(json.dumps(template)))
                self.result.templates.append(key[1])
        if inside is None:
            path = judgement.path
            return patch.rebase(decision.patch, patch.pointer(*path)) if path else decision.patch
        ops = decision.patch
        if not inside.metadata_reaches:
            ops = [op for op in ops if not op["path"].startswith("/metadata")]
            self.result.notes.append(f"{where}: {NO_POD_METADATA}")
        release: list[patch.PatchOp] = []
        if inside.inherits_scheduler:  # the owner's, not the template's, to change
            scheduler = [op for op in ops if op["path"] == "/spec/schedulerName"]
            ops = [op for op in ops if op["path"] != "/spec/schedulerName"]
            if scheduler and inside.owner is not None:
                release = [inside.owner.release()]
                self.result.notes.append(
                    f"{where}: its owner's {inside.owner.where} {inside.owner_scheduler} leaves"
                    f" with legacy HAMi: {_released(inside.owner)}"
                )
        return inside.in_object(ops) + release

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


NO_POD_METADATA = (
    "the object's own metadata does not reach its pods, so the label hami.io/dra and the"
    " annotation hami.io/converted-from are not written (its pods will lack them: `kubectl"
    " get pods -l hami.io/dra=true` will not list them)"
)


def _released(owner: Any) -> str:
    if owner.label:
        return f"label {owner.label} removed"
    return f"{owner.where} set to default-scheduler"


def _existing_templates(documents: list[Any]) -> set[tuple[str, str]]:
    return {
        (
            str((d.get("metadata") or {}).get("namespace", "")),
            str((d.get("metadata") or {}).get("name", "")),
        )
        for d in documents
        if isinstance(d, dict) and d.get("kind") == "ResourceClaimTemplate"
    }


def _convert_json(text: str, changes: _Changes, default_namespace: str | None) -> FileResult:
    """JSON edited as text where it can be (JSON is YAML's flow style: migrate/text_edit.py), so
    that what is not converted stays byte for byte; else written again, two-space indented. A
    single object that needs templates becomes a List of it and them."""
    top = json.loads(text)
    workloads = workloads_of(top)
    changes.existing = _existing_templates(workloads)
    per_workload = [changes.workload(document, default_namespace) for document in workloads]
    result = changes.result
    if not result.converted and not changes.new_templates:
        return result
    result.changed = True
    is_list = str(top.get("kind", "")).endswith("List") and isinstance(top.get("items"), list)
    ops = document_ops(top, per_workload)
    if is_list:
        ops += [patch.add("/items/-", t) for t in changes.new_templates]
    if is_list or not changes.new_templates:
        expected = patch.apply(top, ops)
        try:
            edited = edit_document(text, ops, expected, (2, 0))
            if json.loads(edited) == expected:
                result.text = edited
                return result
        except (NotEditable, ValueError, yaml.YAMLError):
            pass  # written again below
        top = expected
    else:
        top = patch.apply(top, ops)
        top = {"apiVersion": "v1", "kind": "List", "items": [top, *changes.new_templates]}
    result.text = json.dumps(top, indent=2) + "\n"
    return result


def _convert_yaml(text: str, changes: _Changes, default_namespace: str | None) -> FileResult:
    """Each document is read with libyaml first; only those that change go through ruamel's
    (slow, pure-Python) round trip. The others are kept byte for byte."""
    segments = segments_of(text)
    parsed = [list(yaml.load_all(segment, Loader=FAST_LOADER)) for segment in segments]
    documents = [d for docs in parsed for d in docs if d is not None]
    for index, document in enumerate(documents if may_alias(text) else []):
        problem = too_large(document)
        if problem:
            raise ManifestError(f"document {index + 1}: {problem}")
    changes.existing = _existing_templates(documents)
    # segment -> for each of its documents, for each of its workloads, the patch to apply
    edits: dict[int, SegmentEdits] = {}
    for index, docs in enumerate(parsed):
        per_document = [
            [changes.workload(w, default_namespace) for w in workloads_of(d)]
            for d in docs
            if d is not None
        ]
        if any(ops for workloads in per_document for ops in workloads):
            edits[index] = per_document
    result = changes.result
    if not edits and not changes.new_templates:
        return result
    result.changed = True
    round_trip = round_trip_yaml(text)
    indent = guess_indent(text)
    out = []
    for index, segment in enumerate(segments):
        if index not in edits:
            out.append(segment)
            continue
        fast = edited_text(segment, parsed[index], edits[index], indent)
        if fast is not None:
            out.append(fast)
            continue
        out.append(round_trip_segment(round_trip, segment, parsed[index], edits[index]))
    body = "".join(out)
    if changes.new_templates:
        body = with_templates(body, round_trip, changes.new_templates)
    result.text = body
    return result
