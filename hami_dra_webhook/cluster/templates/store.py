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
written (core/translate/template_identity.py).

The cache is kept true by a watch on the webhook's own templates (watch.py).

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
from typing import Protocol

from hami_dra_webhook.cluster.templates.errors import TemplateUnavailable, foreign, unavailable
from hami_dra_webhook.cluster.templates.expiring import Expiring
from hami_dra_webhook.cluster.templates.rate import NamespaceRate
from hami_dra_webhook.cluster.templates.stored_forms import StoredForms
from hami_dra_webhook.cluster.templates.watch import MANAGED_SELECTOR, TemplateWatch
from hami_dra_webhook.core.model import kube_time
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.translate.template_identity import (
    DELETING_ANNOTATION,
    LAST_USED_ANNOTATION,
    stamp_if_unchanged,
    what_differs,
)
from hami_dra_webhook.kube.port import AnswerTooLarge, ApiError, KubeApi

# Where gc.py, the server and tests find them.
__all__ = [
    "DELETING_ANNOTATION",
    "LAST_USED_ANNOTATION",
    "MANAGED_SELECTOR",
    "TemplateUnavailable",
]
# The webhook's largest template (32 requests, each with its type and UUID selectors at their
# bounds) is far below this: a larger object under a template's name is someone else's.
MAX_TEMPLATE_BYTES = 256 << 10
RECREATE_BUDGET = 5.0  # seconds one re-creation after an out-of-band delete may take
CONFIRM_TRIES = 3  # create, or read and stamp, again when the template changes meanwhile
log = logging.getLogger("hami_dra_webhook.templates")


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
        self._stored_forms = StoredForms()
        self._in_flight: dict[tuple[str, str], asyncio.Future[None]] = {}
        self._rate = rate or NamespaceRate(per_second=20.0, burst=100.0)
        self._epoch = 0
        self.watch = TemplateWatch(
            api,
            self._known,
            self.forget,
            self._recreate,
            self._clocks.monotonic,
            self._events.oversized_event,
        )

    def forget(self) -> None:
        self._known.clear()
        self._epoch += 1  # confirmations under way when the cache was emptied are not kept

    def __len__(self) -> int:
        return len(self._known)

    @property
    def watching(self) -> bool:
        """The watch stands: the cache is used (else every admission asks the API)."""
        return self.watch.watching

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
        stamp = {LAST_USED_ANNOTATION: kube_time.stamp(self._clocks.wall())}
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
            stamped = await self._stamp_existing(namespace, template, stamp, deadline)
            if stamped is not None:
                stored_spec, uid = stamped
                break
        else:
            raise TemplateUnavailable(
                503,
                f"ResourceClaimTemplate {namespace}/{name} keeps changing or disappearing; retry",
            )
        # Kept unless no watch stands or resumes, or the cache was emptied meanwhile: then
        # nothing kept it true. (Between two windows it is kept but not used: the next one
        # resumes from the last version seen and shows what happened in between.)
        if self.watch.keeps_cache and epoch == self._epoch:
            expires = confirmed_at + self._ttl
            self._known.put((namespace, name), _Known(expires, template, stored_spec, uid))

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

    async def _stamp_existing(
        self, namespace: str, template: JsonObject, stamp: dict[str, str], deadline: float
    ) -> tuple[JsonObject, str] | None:
        """The template's name is taken: read the object, refuse it unless it is exactly the
        webhook's, and stamp it only as read. Its stored spec and uid; None when it was deleted
        or changed meanwhile (try again)."""
        name = template["metadata"]["name"]
        try:
            existing = await self._api.get_template(
                namespace, name, timeout=self._left(deadline, name), max_bytes=MAX_TEMPLATE_BYTES
            )
        except AnswerTooLarge as error:
            raise self._foreign(
                namespace, name, f"it is larger than any the webhook writes ({error.size} bytes)"
            ) from error
        except ApiError as error:
            if error.status == 404:  # deleted since the 409: create it again
                return None
            raise self._unavailable(error, namespace, name) from error
        stored_spec = await self._stored_form(namespace, template, deadline)
        wrong = what_differs(existing, template, stored_spec)
        if wrong:
            raise self._foreign(namespace, name, wrong)
        found = existing.get("metadata") or {}
        version = str(found.get("resourceVersion") or "")
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
        except ApiError as error:
            # 404: deleted since it was read; 422: changed since (the test failed). Again.
            if error.status not in (404, 422):
                raise self._unavailable(error, namespace, name) from error
            return None
        return stored_spec, str(found.get("uid") or "")

    async def _stored_form(
        self, namespace: str, template: JsonObject, deadline: float
    ) -> JsonObject:
        async def dry_run(namespace: str, probe: JsonObject) -> JsonObject | None:
            return await self._create(namespace, probe, dry_run=True, deadline=deadline)

        return await self._stored_forms.of(namespace, template, dry_run)

    def _foreign(self, namespace: str, name: str, wrong: str) -> TemplateUnavailable:
        self._events.api_error(409)
        return foreign(namespace, name, wrong)

    def _unavailable(self, error: ApiError, namespace: str, name: str) -> TemplateUnavailable:
        self._events.api_error(error.status)
        return unavailable(error, namespace, name)

    def _left(self, deadline: float, name: str) -> float:
        left = deadline - self._clocks.monotonic()
        if left <= 0:
            raise TemplateUnavailable(
                504, f"no time left to create ResourceClaimTemplate {name}; retry the pod"
            )
        return left


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
