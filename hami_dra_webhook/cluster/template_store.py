"""Making sure the ResourceClaimTemplates a pod references exist before the pod is admitted.

A pod that references a missing template stays Pending for up to ~17 minutes of controller
backoff, so templates are created before the admission answers, and failures refuse the pod.
Templates known to exist are cached for `cache_ttl` seconds, so the hot path makes no API call;
each confirmation also stamps `hami.io/last-used`, which the garbage collector respects (its
grace period must be far longer than the cache TTL: see gc.py).

Only a template that is exactly what the webhook writes is ever used or stamped. An existing one
(409) is read (at most MAX_TEMPLATE_BYTES of it: a larger one is not the webhook's) and
compared: its metadata must be exactly the webhook's (labels, annotations, no finalizer or owner,
not being deleted) and its spec what kube-apiserver stores for the webhook's template (learnt
once per name from a server-side dry run, since the server may store a spec otherwise than
written: a feature gate that drops capacity, say); then it is stamped by a JSON patch that holds
only for the version read. Otherwise the pod is refused with what is wrong, and nothing is
written (core/template_identity.py).

The cache is kept true by a watch on the webhook's own templates (`keep_true`), of their
metadata only (a template's spec is immutable: an object with the confirmed uid has the
confirmed spec): one changed by anyone leaves the cache at once; one deleted while cached
leaves it and, unless the garbage collector deleted it (it marks what it deletes, see gc.py), is
created again at once (it was confirmed within the cache TTL, so pods admitted in the watch's
lag may reference it). Each watch resumes where the last one ended (its resourceVersion,
bookmarks included), so the cache lives across them; when the watch breaks, whatever broke it,
or its version is gone (410), the cache is emptied (nothing seen meanwhile can be trusted) and
the watch starts again. An event too large to read (a tenant's object under the webhook's label)
is skipped and counted; the template it names leaves the cache.

The cache is used only while the watch stands: without it every admission confirms its
templates through the API (slower, as correct). So readiness does not depend on the watch, which
objects that tenants write can disturb (issue 34: one 790 KB template, touched once a second,
kept every replica unready). The cache is bounded: expired entries are pruned, at most
`max_entries` kept. API confirmations are rate-limited per namespace, so that no caller can make
the webhook write templates without bound.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from hami_dra_webhook.cluster.expiring import Expiring
from hami_dra_webhook.cluster.rate import NamespaceRate
from hami_dra_webhook.core.template_identity import (
    DELETING_ANNOTATION,
    LAST_USED_ANNOTATION,
    metadata_differs,
    stamp_if_unchanged,
    what_differs,
)
from hami_dra_webhook.core.types import JsonObject
from hami_dra_webhook.kube.port import AnswerTooLarge, ApiError, KubeApi

__all__ = ["DELETING_ANNOTATION", "LAST_USED_ANNOTATION"]  # where gc.py and tests find them
# The webhook's largest template (32 requests, each with its type and UUID selectors at their
# bounds) is far below this: a larger object under a template's name is someone else's.
MAX_TEMPLATE_BYTES = 256 << 10
MANAGED_SELECTOR = "app.kubernetes.io/managed-by=hami-dra-webhook"
MAX_STORED_FORMS = 4096
RECREATE_BUDGET = 5.0  # seconds one re-creation after an out-of-band delete may take
CONFIRM_TRIES = 3  # create, or read and stamp, again when the template changes meanwhile
log = logging.getLogger("hami_dra_webhook.templates")


class TemplateUnavailable(Exception):
    """A template could not be confirmed; the pod must be refused with `message`."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class StoreEvents(Protocol):
    def cache_hit(self) -> None: ...
    def cache_miss(self) -> None: ...
    def template_created(self) -> None: ...
    def api_error(self, status: int) -> None: ...
    def oversized_event(self) -> None: ...


class NoEvents:
    def cache_hit(self) -> None: ...
    def cache_miss(self) -> None: ...
    def template_created(self) -> None: ...
    def api_error(self, status: int) -> None: ...
    def oversized_event(self) -> None: ...


class TemplateStore(Protocol):
    async def ensure(
        self, namespace: str, templates: list[JsonObject], *, dry_run: bool, deadline: float
    ) -> list[str]:
        """Make the templates exist (or validate them on dry-run); returns warnings."""
        ...


def rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Clocks:
    monotonic: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time


@dataclass(slots=True)
class _Known:
    """A confirmed template: until when it is trusted without asking, what it is, the spec
    kube-apiserver stores for it, and the uid of the object confirmed (another uid under its
    name is another object, whatever the watch shows of it)."""

    expires: float
    template: JsonObject
    stored_spec: JsonObject
    uid: str


class ApiTemplateStore:
    """Templates through the API: cached, one in-flight confirmation per template, deadlines."""

    def __init__(
        self,
        api: KubeApi,
        cache_ttl: float = 300.0,
        events: StoreEvents | None = None,
        clocks: Clocks | None = None,
        rate: NamespaceRate | None = None,
        max_entries: int = 65536,
    ) -> None:
        self._api = api
        self._ttl = cache_ttl
        self._events = events or NoEvents()
        self._clocks = clocks or Clocks()
        self._known: Expiring[tuple[str, str], _Known] = Expiring(max_entries, self._clocks)
        self._stored_forms: dict[str, JsonObject] = {}  # template name -> its spec as stored
        self._in_flight: dict[tuple[str, str], asyncio.Future[None]] = {}
        self._recreating: set[asyncio.Task[None]] = set()
        self._rate = rate or NamespaceRate(per_second=20.0, burst=100.0)
        # The watch (keep_true): standing or not, in words for /readyz, and how often it listed
        # afresh (the first start, a 410) and resumed where it was.
        self.watching = False
        self.watch_state = "not started"
        self.relists = self.resumes = self.oversized = 0
        self._epoch = 0

    def forget(self) -> None:
        self._known.clear()
        self._epoch += 1  # confirmations under way when the cache was emptied are not kept

    def __len__(self) -> int:
        return len(self._known)

    async def keep_true(self, retry: float = 5.0, longest: float = 60.0, window: int = 300) -> None:
        """Watch the webhook's templates: drop from the cache each one changed, drop and create
        again each one deleted while cached (forever). Each watch lasts `window` seconds and
        the next resumes from the last resourceVersion seen (bookmarks included), so the cache
        is kept across them; only a 410 (the version is gone) makes it list again, and only
        then, or when the watch breaks, is the cache emptied (what happened meanwhile is
        unknown). A watch that cannot start is retried after `retry` seconds, doubling to
        `longest`."""
        wait, version = retry, ""
        try:
            while True:
                broken = False
                try:
                    async for event in self._api.watch_templates(
                        MANAGED_SELECTOR, version, window=window
                    ):
                        version = self._watched(event, version)
                        if event.get("type") == "WATCHING":
                            wait = retry
                except Exception as error:  # whatever broke it: list again, never a dead job
                    if not isinstance(error, ApiError) or error.status == 410:
                        version = ""  # gone from the server's history, or unknown: list again
                    self.watch_state = f"down: {error}; retrying in {wait:g}s"[:300]
                    log.warning(
                        "watching ResourceClaimTemplates failed (%s); retrying in %gs", error, wait
                    )
                    broken = True
                self.watching = False
                if broken:
                    self.forget()
                    await asyncio.sleep(wait)
                    wait = min(longest, wait * 2)
        finally:
            self.watching = False
            for task in self._recreating:
                task.cancel()

    def _watched(self, event: JsonObject, version: str) -> str:
        """Take one watch event; the resourceVersion to resume from after it."""
        kind = event.get("type")
        if kind == "WATCHING":
            if event.get("listed"):
                self.forget()  # a new start: what was deleted before it is unknown
                self.relists += 1
            else:
                self.resumes += 1
            self.watching = True
            version = str(event.get("resourceVersion") or version)
            self.watch_state = f"watching from resourceVersion {version}"
            return version
        if kind == "OVERSIZED":
            self._oversized(event)
            return version
        stored = event.get("object")
        stored = stored if isinstance(stored, dict) else {}
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            self._seen(str(kind), stored)
        metadata = stored.get("metadata")
        seen = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
        return str(seen) if seen else version

    def _oversized(self, event: JsonObject) -> None:
        """An event too large to read: the template it names is not the webhook's (any more)
        and leaves the cache; when it names none, nothing cached can be trusted."""
        self.oversized += 1
        self._events.oversized_event()
        namespace, name = str(event.get("namespace") or ""), str(event.get("name") or "")
        log.warning(
            "skipped a ResourceClaimTemplate watch event of %s bytes (%s): too large to be"
            " the webhook's",
            event.get("size"),
            f"{namespace}/{name}" if name else "unnamed",
        )
        if name:
            self._known.pop((namespace, name))
        else:
            self.forget()

    def _seen(self, kind: str, stored: JsonObject) -> None:
        metadata = stored.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        key = (str(metadata.get("namespace")), str(metadata.get("name")))
        known = self._known.get(key)
        if known is None:
            return
        if kind != "DELETED":
            wrong = metadata_differs(metadata, known.template)
            if str(metadata.get("uid") or "") != known.uid:
                wrong = "it is another object under the same name (another uid)"
            if wrong:
                self._known.pop(key)
                log.warning(
                    "ResourceClaimTemplate %s/%s was changed by someone else (%s): no longer"
                    " used; pods that need it are refused until it is deleted",
                    *key,
                    wrong,
                )
            return
        self._known.pop(key)
        if str(metadata.get("uid") or "") != known.uid:
            return  # another object than the one confirmed: it was never used
        annotations = metadata.get("annotations")
        annotations = annotations if isinstance(annotations, dict) else {}
        if known.expires > self._clocks.monotonic() and DELETING_ANNOTATION not in annotations:
            task = asyncio.get_running_loop().create_task(self._recreate(*key, known.template))
            self._recreating.add(task)
            task.add_done_callback(self._recreating.discard)

    async def _recreate(self, namespace: str, name: str, template: JsonObject) -> None:
        """Create again a template deleted while in use, within the namespace's rate."""
        now = self._clocks.monotonic()
        where = f"ResourceClaimTemplate {namespace}/{name} was deleted while in use"
        if not self._rate.take(namespace, 1, now):
            log.warning(
                "%s; the next pod that needs it creates it (namespace over its rate)", where
            )
            return
        try:
            await self._ensure_one(
                namespace, template, dry_run=False, deadline=now + RECREATE_BUDGET
            )
        except TemplateUnavailable as error:
            log.warning("%s; creating it again failed: %s", where, error.message)
        else:
            log.warning("%s: created again", where)

    async def ensure(
        self, namespace: str, templates: list[JsonObject], *, dry_run: bool, deadline: float
    ) -> list[str]:
        now = self._clocks.monotonic()
        missing = []
        for template in templates:
            known = (
                self._known.get((namespace, template["metadata"]["name"]))
                if self.watching
                else None
            )
            if known is not None and known.expires > now:
                self._events.cache_hit()
            else:
                self._events.cache_miss()
                missing.append(template)
        if missing and not self._rate.take(namespace, len(missing), now):
            self._events.api_error(429)
            raise TemplateUnavailable(
                429,
                f"too many new ResourceClaimTemplates in namespace {namespace} (at most"
                f" {self._rate.per_second:g} a second after {self._rate.burst:g}); retry",
            )
        if missing:
            # The deadline holds even when something awaited here hangs; cache hits need no timer.
            try:
                async with asyncio.timeout_at(self._loop_deadline(deadline)):
                    await asyncio.gather(
                        *(
                            self._ensure_one(namespace, t, dry_run=dry_run, deadline=deadline)
                            for t in missing
                        )
                    )
            except TimeoutError as error:
                names = ", ".join(t["metadata"]["name"] for t in missing)
                raise TemplateUnavailable(
                    504,
                    f"the Kubernetes API did not confirm ResourceClaimTemplates {names}"
                    " in time; retry",
                ) from error
        return []

    def _loop_deadline(self, deadline: float) -> float:
        loop = asyncio.get_running_loop()
        return loop.time() + (deadline - self._clocks.monotonic())

    async def _ensure_one(
        self, namespace: str, template: JsonObject, *, dry_run: bool, deadline: float
    ) -> None:
        name = template["metadata"]["name"]
        if dry_run:
            # sideEffects NoneOnDryRun: validate with a server-side dry run, create nothing.
            body = {**template, "metadata": {**template["metadata"], "namespace": namespace}}
            await self._create(namespace, body, dry_run=True, deadline=deadline)
            return
        key = (namespace, name)
        running = self._in_flight.get(key)
        if running is None:
            running = asyncio.get_running_loop().create_future()
            self._in_flight[key] = running
            try:
                await self._confirm(namespace, template, deadline)
            except asyncio.CancelledError:
                # The leader ran out of time; admissions waiting on it get a refusal to retry.
                running.set_exception(
                    TemplateUnavailable(504, f"timed out confirming ResourceClaimTemplate {name}")
                )
                running.exception()  # retrieved here, so an unawaited future logs nothing
                raise
            except Exception as error:
                running.set_exception(error)
                running.exception()
                raise
            else:
                running.set_result(None)
            finally:
                del self._in_flight[key]
            return
        await asyncio.shield(running)

    async def _confirm(self, namespace: str, template: JsonObject, deadline: float) -> None:
        """Create it, or stamp last-used on the existing one if it is exactly the webhook's
        (else refuse); then cache it."""
        name = template["metadata"]["name"]
        stamp = {LAST_USED_ANNOTATION: rfc3339(self._clocks.wall())}
        body = {
            **template,
            "metadata": {
                **template["metadata"],
                "namespace": namespace,
                "annotations": {**template["metadata"].get("annotations", {}), **stamp},
            },
        }
        confirmed_at, epoch = self._clocks.monotonic(), self._epoch
        for _ in range(CONFIRM_TRIES):
            created = await self._create(namespace, body, dry_run=False, deadline=deadline)
            if created is not None:
                stored_spec = created.get("spec")
                if not isinstance(stored_spec, dict):
                    stored_spec = await self._stored_form(namespace, template, deadline)
                uid = str((created.get("metadata") or {}).get("uid") or "")
                break
            try:
                existing = await self._api.get_template(
                    namespace,
                    name,
                    timeout=self._left(deadline, name),
                    max_bytes=MAX_TEMPLATE_BYTES,
                )
            except AnswerTooLarge as error:
                raise self._foreign(
                    namespace,
                    name,
                    f"it is larger than any the webhook writes ({error.size} bytes)",
                ) from error
            except ApiError as error:
                if error.status == 404:  # deleted since the 409: create it again
                    continue
                raise self._unavailable(error, namespace, name) from error
            stored_spec = await self._stored_form(namespace, template, deadline)
            wrong = what_differs(existing, template, stored_spec)
            if wrong:
                raise self._foreign(namespace, name, wrong)
            found = existing.get("metadata") or {}
            version = str(found.get("resourceVersion") or "")
            uid = str(found.get("uid") or "")
            # Marked by a garbage collector whose delete this stamp will now fail: in use again.
            annotations = found.get("annotations") or {}
            marked = (DELETING_ANNOTATION,) if DELETING_ANNOTATION in annotations else ()
            try:
                await self._api.patch_template(
                    namespace,
                    name,
                    stamp_if_unchanged(version, stamp, drop=marked),
                    timeout=self._left(deadline, name),
                )
                break
            except ApiError as error:
                # 404: deleted since it was read; 422: changed since (the test failed). Again.
                if error.status not in (404, 422):
                    raise self._unavailable(error, namespace, name) from error
        else:
            raise TemplateUnavailable(
                503,
                f"ResourceClaimTemplate {namespace}/{name} keeps changing or disappearing; retry",
            )
        if self.watching and epoch == self._epoch:  # else nothing kept it true meanwhile
            expires = confirmed_at + self._ttl
            self._known.put((namespace, name), _Known(expires, template, stored_spec, uid))

    async def _stored_form(
        self, namespace: str, template: JsonObject, deadline: float
    ) -> JsonObject:
        """The spec kube-apiserver stores for `template`: learnt once per name, from a
        server-side dry run under a generated name (the name itself is taken)."""
        name = template["metadata"]["name"]
        known = self._stored_forms.get(name)
        if known is not None:
            return known
        probe = {
            **template,
            "metadata": {
                "generateName": f"{name}-",
                "namespace": namespace,
                "labels": template["metadata"]["labels"],
                "annotations": template["metadata"]["annotations"],
            },
        }
        answer = await self._create(namespace, probe, dry_run=True, deadline=deadline)
        stored_spec = (answer or {}).get("spec")
        if not isinstance(stored_spec, dict):
            raise TemplateUnavailable(
                503, f"the dry run of ResourceClaimTemplate {namespace}/{name} returned no spec"
            )
        if len(self._stored_forms) >= MAX_STORED_FORMS:
            del self._stored_forms[next(iter(self._stored_forms))]
        self._stored_forms[name] = stored_spec
        return stored_spec

    def _foreign(self, namespace: str, name: str, wrong: str) -> TemplateUnavailable:
        """The refusal for a pod whose template's name is held by an object the webhook did
        not write (nothing is stamped or changed on it)."""
        what = f"ResourceClaimTemplate {namespace}/{name}"
        self._events.api_error(409)
        log.warning("refused to use %s, which the webhook did not write: %s", what, wrong)
        return TemplateUnavailable(
            409,
            f"{what} exists but is not the one this webhook writes ({wrong}): someone else"
            f" created or changed it, so it is not used; delete it (kubectl -n {namespace}"
            f" delete resourceclaimtemplate {name}) and create the pod again",
        )

    async def _create(
        self, namespace: str, template: JsonObject, *, dry_run: bool, deadline: float
    ) -> JsonObject | None:
        """The stored object when created (or validated); None when the name is taken."""
        metadata = template["metadata"]
        name = str(metadata.get("name") or metadata.get("generateName"))
        try:
            created = await self._api.create_template(
                namespace, template, dry_run=dry_run, timeout=self._left(deadline, name)
            )
        except ApiError as error:
            if error.status == 409:
                return None
            raise self._unavailable(error, namespace, name) from error
        if not dry_run:
            self._events.template_created()
            log.info("created ResourceClaimTemplate %s/%s", namespace, name)
        return created

    def _left(self, deadline: float, name: str) -> float:
        left = deadline - self._clocks.monotonic()
        if left <= 0:
            raise TemplateUnavailable(
                504, f"no time left to create ResourceClaimTemplate {name}; retry the pod"
            )
        return left

    def _unavailable(self, error: ApiError, namespace: str, name: str) -> TemplateUnavailable:
        self._events.api_error(error.status)
        what = f"ResourceClaimTemplate {namespace}/{name}"
        if error.status in (401, 403):
            return TemplateUnavailable(
                500,
                f"the webhook may not create {what} ({error.status} {error.reason}:"
                f" {error.message}); check its RBAC",
            )
        if error.status in {400, 422}:
            return TemplateUnavailable(422, f"the API server rejected {what}: {error.message}")
        if error.status == 0:
            return TemplateUnavailable(
                503, f"the Kubernetes API did not answer while creating {what} ({error}); retry"
            )
        return TemplateUnavailable(
            503, f"the Kubernetes API failed to create {what} ({error}); retry"
        )


class OfflineTemplateStore:
    """No cluster configured: create nothing, say what would have been created."""

    async def ensure(
        self, namespace: str, templates: list[JsonObject], *, dry_run: bool, deadline: float
    ) -> list[str]:
        warnings = []
        for template in templates:
            name = template["metadata"]["name"]
            log.debug("offline: would create ResourceClaimTemplate %s/%s", namespace, name)
            warnings.append(f"offline webhook: ResourceClaimTemplate {name} was not created")
        return warnings
