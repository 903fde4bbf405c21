"""`hami-dra-webhook dry-run`: preview what the webhook does to manifests, without a cluster."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from typing import Any, TextIO

from hami_dra_webhook.admission.admitted import AdmissionRules, Judgement
from hami_dra_webhook.cli import exit_codes
from hami_dra_webhook.cli.diff_view import add_color
from hami_dra_webhook.cli.inputs import (
    add_inputs,
    add_rules,
    admission_rules,
    exit_codes_help,
    inputs,
    load_policy,
    nothing_read,
)
from hami_dra_webhook.cli.terminal import raw
from hami_dra_webhook.core.model import patch
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.outcome.decision import (
    Converted,
    Decision,
    Outcome,
    Refusal,
)
from hami_dra_webhook.core.review.translation_cache import TranslationCache
from hami_dra_webhook.core.settings.policy import PolicyError
from hami_dra_webhook.files.manifests import (
    Manifest,
    ManifestError,
    dump_yaml,
    pod_template,
    read_manifests,
)
from hami_dra_webhook.migrate.quotas import QuotaReport, dra_quota_ops, quota_report


@dataclass
class DryRunResult:
    """One input object after translation, in the shape of `-o json` items."""

    api_version: str
    kind: str
    namespace: str
    name: str
    outcome: Outcome
    message: str | None = None
    reason: str | None = None  # a refusal's tag (docs/translation.md), beside its message
    warnings: list[str] = field(default_factory=list)
    info: list[str] = field(default_factory=list)  # what each GPU container gets
    patch: list[patch.PatchOp] = field(default_factory=list)
    object: Any = None
    templates: list[JsonObject] = field(default_factory=list)
    source: str = ""  # file, or file#N: its Nth document
    # Pod templates inside an object that is not a built-in workload, which use legacy keys:
    # converted at admission when their pods are created, not here.
    embedded: list[EmbeddedResult] = field(default_factory=list)

    def as_json(self) -> JsonObject:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "source": self.source,
            "outcome": self.outcome,
            "reason": self.reason,
            "message": self.message,
            "info": self.info,
            "warnings": self.warnings,
            "patch": self.patch,
            "object": self.object,
            "resourceClaimTemplates": self.templates,
            "embedded": [e.as_json() for e in self.embedded],
        }

    @property
    def title(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name} ({self.source})"

    @property
    def refused(self) -> bool:
        return self.outcome == "refused" or any(e.outcome == "refused" for e in self.embedded)


@dataclass
class EmbeddedResult:
    """What the pods of one pod template inside a custom resource become at admission."""

    path: str
    outcome: Outcome
    reason: str | None
    message: str | None
    warnings: list[str]
    templates: list[JsonObject]
    info: list[str] = field(default_factory=list)
    rewritable: bool = True  # `convert --embedded` can rewrite it (not a bare pod spec)

    def as_json(self) -> JsonObject:
        return {
            "path": self.path,
            "outcome": self.outcome,
            "reason": self.reason,
            "message": self.message,
            "info": self.info,
            "warnings": self.warnings,
            "resourceClaimTemplates": self.templates,
        }


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "dry-run",
        help="show what the webhook would do to manifests (no cluster needed)",
        description="Translate legacy HAMi GPU requests in manifests and print the result. "
        + exit_codes_help(None),
    )
    add_inputs(parser, "manifest files or folders")
    parser.add_argument(
        "-n",
        "--namespace",
        help="put workloads without a namespace, and their templates, in this one (default:"
        " leave it unset, so that `kubectl apply -n` decides)",
    )
    parser.add_argument("--config", metavar="FILE", help="HAMi device-config.yaml (policy)")
    add_rules(parser)
    parser.add_argument(
        "-o",
        "--output",
        choices=("yaml", "json", "patch", "diff"),
        default="yaml",
        help="yaml: converted objects then templates; json: a report; patch: one JSON patch a"
        " line; diff: each object's change as a unified diff, then the templates (as --diff)",
    )
    parser.add_argument(
        "--diff",
        dest="output",
        action="store_const",
        const="diff",
        help="the same as -o diff: what `kubectl diff` shows a reviewer (coloured on a terminal)",
    )
    add_color(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    try:
        policy = load_policy(args.config, stderr)
        named = inputs(args)
        if not named:
            stderr.write("error: give manifest files or folders (or - for stdin)\n")
            return exit_codes.USAGE
        read = read_manifests(named, stdin)
    except (PolicyError, ManifestError) as error:
        stderr.write(f"error: {error}\n")
        return exit_codes.UNREADABLE
    for problem in read.unreadable:
        stderr.write(f"unreadable: {problem}\n")
    if nothing_read(read, named, stderr):
        return exit_codes.UNREADABLE
    objects = []
    for manifest in read.manifests:
        if _is_object(manifest.document):
            objects.append(manifest)
        else:
            stderr.write(f"info: {manifest.source}: skipped a document without apiVersion/kind\n")
    # The pods of a file repeat (one template per workload, copies of it): each kind is
    # translated once.
    cache = TranslationCache(from_yaml=True)
    rules = admission_rules(args, policy)
    results = [convert(m, rules, args.namespace, cache) for m in objects]
    for result in results:
        for line in result.info:
            stderr.write(f"info: {result.title}: {line}\n")
        for warning in result.warnings:
            stderr.write(f"warning: {result.title}: {warning}\n")
        if result.outcome == "refused":
            stderr.write(f"refused: {result.title}: {result.message}\n")
        for inside in result.embedded:
            for line in inside.info:
                stderr.write(f"info: {result.title} {inside.path}: {line}\n")
            for warning in inside.warnings:
                stderr.write(f"warning: {result.title} {inside.path}: {warning}\n")
            if inside.outcome == "refused":
                stderr.write(
                    f"refused: {result.title} {inside.path}: its pods will be refused at"
                    f" admission: {inside.message}\n"
                )
    if args.output == "diff":
        from hami_dra_webhook.cli.diff_view import colour_wanted

        raw(stdout).write(render_diff(objects, results, colour_wanted(stdout, args.color)))
    else:
        stdout.write(render(results, args.output))
    return exit_codes.worst(
        exit_codes.REFUSED if any(r.refused for r in results) else exit_codes.OK,
        exit_codes.UNREADABLE if read.unreadable else exit_codes.OK,
    )


def _is_object(document: Any) -> bool:
    return (
        isinstance(document, dict)
        and bool(document.get("kind"))
        and bool(document.get("apiVersion"))
    )


def convert(
    manifest: Manifest,
    rules: AdmissionRules,
    default_namespace: str | None,
    cache: TranslationCache,
) -> DryRunResult:
    """Translate the pod template of one object as the webhook's `rules` do; other kinds pass
    through unchanged.

    A workload without a namespace, and its templates, get `--namespace` when given; with
    neither they carry none, so that `kubectl apply -n NS` puts them side by side.
    """
    document = manifest.document
    metadata = document.get("metadata") if isinstance(document, dict) else None
    metadata = metadata if isinstance(metadata, dict) else {}
    kind = str(document.get("kind", "")) if isinstance(document, dict) else ""
    result = DryRunResult(
        api_version=str(document.get("apiVersion", "")) if isinstance(document, dict) else "",
        kind=kind or "<no kind>",
        namespace=str(metadata.get("namespace") or default_namespace or ""),
        name=str(metadata.get("name") or metadata.get("generateName") or "<no name>"),
        outcome="unchanged",
        object=document,
        source=manifest.where,
    )
    built_in = pod_template(document) is not None
    quota = None if built_in else quota_report(document, rules.policy, "", result.namespace)
    if quota is not None:  # what convert writes (the webhook leaves quotas)
        _quota(result, document, quota)
        return result
    namespace = metadata.get("namespace") or default_namespace
    judged = rules.templates(document, str(namespace) if namespace else None, cache.decide)
    if not built_in:
        _judge_embedded(result, kind, judged.items)
        return result
    [judgement] = judged.items
    translation = judgement.decision
    result.outcome = translation.outcome
    result.info, result.warnings = split_summaries(translation)
    result.warnings += judgement.notes
    if isinstance(translation, Refusal):
        result.message, result.reason = translation.message, translation.reason
    if isinstance(translation, Converted):
        path = judgement.path
        result.patch = (
            patch.rebase(translation.patch, patch.pointer(*path)) if path else translation.patch
        )
        if default_namespace and not metadata.get("namespace"):
            result.patch = [
                *result.patch,
                patch.add(patch.pointer("metadata", "namespace"), default_namespace),
            ]
        result.object = patch.apply(document, result.patch)
        result.templates = list(translation.templates)
    return result


def _quota(result: DryRunResult, document: Any, quota: QuotaReport) -> None:
    result.patch = dra_quota_ops(document, quota)
    if result.patch:
        result.outcome = "converted"
        result.object = patch.apply(document, result.patch)
    note = f"; {quota.note}" if quota.note else ""
    result.warnings.append(f"counts {', '.join(quota.counted)}: {quota.stops}{note}")


def _judge_embedded(result: DryRunResult, kind: str, judgements: list[Judgement]) -> None:
    """A custom resource's embedded pod templates, judged into `result` (left as they are)."""
    result.embedded = [_embedded(j) for j in judgements if j.worth_saying]
    converted = [e for e in result.embedded if e.outcome == "converted"]
    if converted:
        rewritten = sum(e.rewritable for e in converted)
        which = "them" if rewritten == len(converted) else str(rewritten)
        result.warnings.append(
            f"{len(converted)} pod template(s) inside this {kind} ask for legacy GPU"
            " resources: their pods are converted when they are created (by the webhook, at"
            " admission)"
            + (f"; `convert --embedded` rewrites {which} here instead" if rewritten else "")
        )


def split_summaries(decision: Decision) -> tuple[list[str], list[str]]:
    """(info, warnings): the conversion's summary lines apart from the real warnings (new
    lists: the decision may be another pod's too)."""
    info = decision.summaries if isinstance(decision, Converted) else []
    said = set(info)
    return info, [w for w in decision.warnings if w not in said]


def _embedded(judgement: Judgement) -> EmbeddedResult:
    """What the pods of one pod template inside the object become at admission (as their
    controller creates them: a Volcano Job's take its scheduler)."""
    decision, inside = judgement.decision, judgement.inside
    assert inside is not None  # a template inside an object that is no built-in workload
    info, warnings = split_summaries(decision)
    warnings += judgement.notes
    left_alone = judgement.left_alone
    if inside.inherited and left_alone:
        warnings = [f"{inside.inherited}: {w}" if w == left_alone else w for w in warnings]
    return EmbeddedResult(
        path=judgement.where,
        outcome=decision.outcome,
        reason=decision.reason if isinstance(decision, Refusal) else None,
        message=decision.message if isinstance(decision, Refusal) else None,
        warnings=warnings,
        templates=decision.templates if isinstance(decision, Converted) else [],
        info=[*info, inside.left] if inside.left else info,
        rewritable=judgement.rewritable,
    )


def render_diff(manifests: list[Any], results: list[DryRunResult], colour: bool) -> str:
    """Each object's change, then each template it needs (new: all added)."""
    from hami_dra_webhook.cli.diff_view import unified

    parts = [
        unified(dump_yaml([m.document]), dump_yaml([r.object]), r.title, colour)
        for m, r in zip(manifests, results, strict=True)
        if r.object is not None
    ]
    seen: set[tuple[str, str]] = set()
    for result in results:
        for template in result.templates:
            key = (template["metadata"].get("namespace", ""), template["metadata"]["name"])
            if key not in seen:
                seen.add(key)
                name = f"ResourceClaimTemplate {'/'.join(k for k in key if k)}"
                parts.append(unified("", dump_yaml([template]), name, colour))
    return "".join(parts)


def render(results: list[DryRunResult], output: str) -> str:
    if output == "json":
        return json.dumps({"items": [r.as_json() for r in results]}, indent=2) + "\n"
    if output == "patch":
        return "".join(json.dumps(r.patch, separators=(",", ":")) + "\n" for r in results)
    documents = [r.object for r in results]
    seen: set[tuple[str, str]] = set()
    for result in results:
        for template in result.templates:
            key = (template["metadata"].get("namespace", ""), template["metadata"]["name"])
            if key not in seen:
                seen.add(key)
                documents.append(template)
    return dump_yaml(documents) if documents else ""
