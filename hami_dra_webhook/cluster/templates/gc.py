"""Garbage collection of managed ResourceClaimTemplates that no pod uses any more.

Templates are shared by content and not owned by pods, so nothing else deletes them. A template
is deleted only when (1) no pod in its namespace references it, (2) it was created and last
confirmed (`hami.io/last-used`) more than `grace` seconds ago, (3) it has not changed since it
was read (the delete carries a resourceVersion precondition), and (4) it is exactly a template the
webhook writes (its name is a hash of its content): one that someone else made under the
webhook's labels is never deleted, only counted. Before the delete, the template is marked
(`hami.io/deleting`, with the same precondition): the webhooks' watches re-create a cached
template someone else deletes, but leave one the garbage collector deleted.

Why an admitted pod can never reference a deleted template: an admission uses a template only
after confirming it (create, or stamping last-used) or from a cache entry younger than the cache
TTL. A confirmation that happens before this pass reads the template makes it too recent to
delete (TTL plus clock skew is far below the grace period); one that happens after the read
writes a new stamp, which changes resourceVersion, so the precondition fails the delete. (A stamp
equal to the one stored, within the same second, is a no-op for kube-apiserver and keeps the
resourceVersion; but such a template was stamped a second ago and is far from old enough.)
Several replicas may run this at once: each delete is conditional, a lost race is a 409 or 404.

Memory stays bounded whatever tenants create under the webhook's labels (issue 34: 60 templates
of 3.3 MB each, listed whole, took a replica from 85 to 566 MiB every pass): templates are read
as metadata (PartialObjectMetadata) a page at a time, each answer within a byte bound (kube/
client.py), and only a slim record of each candidate is kept; a candidate's whole object is read
(within MAX_TEMPLATE_BYTES) only to verify it just before its delete. Pods are read a page at a
time too; a namespace with a pod too large to read is left alone (what it uses is unknown).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Literal

from hami_dra_webhook.cluster.templates.store import MAX_TEMPLATE_BYTES
from hami_dra_webhook.core.model import kube_time
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.translate.claims import MANAGED_BY, MANAGED_BY_LABEL
from hami_dra_webhook.core.translate.template_identity import (
    DELETING_ANNOTATION,
    LAST_USED_ANNOTATION,
    foreign_metadata,
    not_written_by_webhook,
    stamp_if_unchanged,
)
from hami_dra_webhook.kube.port import AnswerTooLarge, ApiError, KubeApi

# kubectl's --dry-run: None deletes; "client" lists; "server" asks the API to check each delete.
DryRun = Literal["client", "server"] | None
MANAGED_SELECTOR = f"{MANAGED_BY_LABEL}={MANAGED_BY}"
log = logging.getLogger("hami_dra_webhook.gc")


@dataclass
class GcReport:
    deleted: list[str] = field(default_factory=list)
    in_use: list[str] = field(default_factory=list)
    recent: list[str] = field(default_factory=list)
    raced: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)  # not the webhook's: never deleted
    # In a namespace with a pod too large to read: what is used there is unknown, so kept.
    unknown_use: list[str] = field(default_factory=list)
    skipped: int = 0  # templates too large to read even as metadata (not the webhook's)

    def summary(self, dry_run: bool = False) -> str:
        """In words; `dry_run`: nothing was deleted, as kubectl says it ("(dry run)")."""
        deleted = (
            f"would delete {len(self.deleted)} (dry run)"
            if dry_run
            else (f"deleted {len(self.deleted)}")
        )
        return (
            f"{deleted}, in use {len(self.in_use)},"
            f" used within the grace period {len(self.recent)}, changed meanwhile"
            f" {len(self.raced)}, not written by the webhook (kept) {len(self.foreign)}"
            + (
                f", kept in namespaces with unreadable pods {len(self.unknown_use)}"
                if self.unknown_use
                else ""
            )
            + (f", too large to read (kept) {self.skipped}" if self.skipped else "")
        )


@dataclass(frozen=True, slots=True)
class _Candidate:
    """What is kept of a template between the list and its delete (its metadata can be large)."""

    namespace: str
    name: str
    last_used: float
    version: tuple[str, str]  # uid and resourceVersion: the object as listed


class KnownForeign:
    """Templates found not to be the webhook's, by uid and resourceVersion, so that the passes
    of a serving process read each one whole once, not at every pass (a tenant's 100 templates
    of 3 MB each made kube-apiserver serve 300 MB a pass); a change to one reads it again.
    At most `limit` kept (the oldest go first)."""

    def __init__(self, limit: int = 10_000) -> None:
        self._limit = limit
        self._known: dict[tuple[str, str], tuple[str, str]] = {}

    def __contains__(self, candidate: object) -> bool:
        if not isinstance(candidate, _Candidate):
            return False
        return self._known.get((candidate.namespace, candidate.name)) == candidate.version

    def add(self, candidate: _Candidate) -> None:
        key = (candidate.namespace, candidate.name)
        self._known.pop(key, None)
        if len(self._known) >= self._limit:
            del self._known[next(iter(self._known))]
        self._known[key] = candidate.version


def referenced_templates(pods: list[JsonObject]) -> set[str]:
    names = set()
    for pod in pods:
        for claim in (pod.get("spec") or {}).get("resourceClaims") or []:
            if isinstance(claim, dict) and claim.get("resourceClaimTemplateName"):
                names.add(str(claim["resourceClaimTemplateName"]))
    return names


def _seconds(stamp: object) -> float:
    """Seconds since the epoch of a Kubernetes time; 0 (the oldest) when it is not one."""
    return kube_time.seconds_of(stamp) or 0.0


def last_used(template: JsonObject) -> float:
    metadata = template.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    return max(
        _seconds(annotations.get(LAST_USED_ANNOTATION)), _seconds(metadata.get("creationTimestamp"))
    )


async def collect_garbage(
    api: KubeApi,
    *,
    now: float,
    grace: float,
    dry_run: DryRun = None,
    timeout: float = 30.0,
    known_foreign: KnownForeign | None = None,
    namespace: str | None = None,
) -> GcReport:
    """One pass over every namespace (or `namespace` only); `now` is wall-clock seconds.
    `known_foreign`, kept across passes, spares reading again what an earlier pass found not to
    be the webhook's."""
    known_foreign = known_foreign if known_foreign is not None else KnownForeign()
    report = GcReport()
    by_namespace: dict[str, list[_Candidate]] = {}
    skipped_before = api.skipped_items
    async for page in api.template_metadata_pages(MANAGED_SELECTOR, timeout=timeout):
        for item in page:
            metadata = item.get("metadata") if isinstance(item, dict) else None
            if not isinstance(metadata, dict):
                continue
            where, name = str(metadata.get("namespace", "")), str(metadata.get("name", ""))
            if namespace is not None and where != namespace:
                continue
            if foreign_metadata(metadata) is not None:
                report.foreign.append(f"{where}/{name}")
                continue
            version = (str(metadata.get("uid", "")), str(metadata.get("resourceVersion", "")))
            candidate = _Candidate(where, name, last_used({"metadata": metadata}), version)
            if candidate in known_foreign:
                report.foreign.append(f"{where}/{name}")
                continue
            by_namespace.setdefault(where, []).append(candidate)
        del page
    report.skipped = api.skipped_items - skipped_before
    for each, candidates in sorted(by_namespace.items()):
        used: set[str] = set()
        skipped_before = api.skipped_items
        async for pods in api.pod_pages(each, timeout=timeout):  # never all at once
            used |= referenced_templates(pods)
        pods_unread = api.skipped_items != skipped_before
        for candidate in candidates:
            name, where = candidate.name, f"{each}/{candidate.name}"
            if name in used:
                report.in_use.append(where)
            elif pods_unread:
                report.unknown_use.append(where)
            elif candidate.last_used > now - grace:
                report.recent.append(where)
            else:
                found = await _collect(api, candidate, report, dry_run=dry_run, timeout=timeout)
                if found == "foreign":
                    known_foreign.add(candidate)
    return report


async def _collect(
    api: KubeApi, candidate: _Candidate, report: GcReport, *, dry_run: DryRun, timeout: float
) -> str:
    """Read the whole candidate (within a bound), verify that it is the webhook's and still
    unused for the grace period, and delete that very version; "foreign" when it is not the
    webhook's, else ""."""
    namespace, name = candidate.namespace, candidate.name
    where = f"{namespace}/{name}"
    try:
        template = await api.get_template(
            namespace, name, timeout=timeout, max_bytes=MAX_TEMPLATE_BYTES
        )
    except AnswerTooLarge:
        report.foreign.append(where)
        return "foreign"
    except ApiError as error:
        if error.status != 404:
            raise
        report.raced.append(where)
        return ""
    if not_written_by_webhook(template) is not None:
        report.foreign.append(where)
        return "foreign"
    if last_used(template) != candidate.last_used:
        report.raced.append(where)  # stamped since it was listed: in use again
    elif dry_run == "client":
        report.deleted.append(where)
    else:
        try:
            if dry_run == "server":  # no mark: the delete must name the version read
                version = str(template["metadata"].get("resourceVersion", ""))
                await api.delete_template(namespace, name, version, timeout=timeout, dry_run=True)
            else:
                await _delete(api, namespace, template, timeout)
        except ApiError as error:
            if error.status not in (404, 409, 422):
                raise
            report.raced.append(where)
        else:
            report.deleted.append(where)
            if dry_run is None:
                log.info("deleted unused ResourceClaimTemplate %s", where)
    return ""


async def _delete(api: KubeApi, namespace: str, template: JsonObject, timeout: float) -> None:
    """Mark it as the garbage collector's (only if unchanged since read: 422 otherwise), then
    delete that version (409 if it changed since)."""
    metadata = template["metadata"]
    mark = stamp_if_unchanged(str(metadata.get("resourceVersion", "")), {DELETING_ANNOTATION: "gc"})
    marked = await api.patch_template(namespace, metadata["name"], mark, timeout=timeout)
    version = str((marked.get("metadata") or {}).get("resourceVersion", ""))
    await api.delete_template(namespace, metadata["name"], version, timeout=timeout)
