"""Making sure the ResourceClaimTemplates a pod references exist before the pod is admitted.

A pod that references a missing template stays Pending for up to ~17 minutes of controller
backoff, so templates are created before the admission answers, and failures refuse the pod.
Templates known to exist are cached for `cache_ttl` seconds, so the hot path makes no API call;
each confirmation also stamps `hami.io/last-used`, which the garbage collector respects (its
grace period must be far longer than the cache TTL: see gc.py).

The cache is kept true by a watch on the webhook's own templates (`keep_true`): one deleted by
anyone leaves the cache at once, and while the watch is down the cache is emptied (nothing seen
then can be trusted). It is bounded: expired entries are pruned, at most `max_entries` kept.
API confirmations are rate-limited per namespace, so that no caller can make the webhook write
templates without bound.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from hami_dra_webhook.core.types import JsonObject
from hami_dra_webhook.kube.port import ApiError, KubeApi

LAST_USED_ANNOTATION = "hami.io/last-used"
MANAGED_SELECTOR = "app.kubernetes.io/managed-by=hami-dra-webhook"
MAX_NAMESPACE_BUCKETS = 4096
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


class NoEvents:
    def cache_hit(self) -> None: ...
    def cache_miss(self) -> None: ...
    def template_created(self) -> None: ...
    def api_error(self, status: int) -> None: ...


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


@dataclass
class _Bucket:
    tokens: float
    at: float


class NamespaceRate:
    """A token bucket per namespace: `burst` API confirmations at once, `per_second` after.
    At most MAX_NAMESPACE_BUCKETS namespaces are remembered (a full bucket is forgotten first,
    since forgetting it changes nothing)."""

    def __init__(self, per_second: float, burst: float) -> None:
        self.per_second, self.burst = per_second, burst
        self._buckets: dict[str, _Bucket] = {}

    def take(self, namespace: str, count: int, now: float) -> bool:
        bucket = self._buckets.pop(namespace, None)
        if bucket is None:
            if len(self._buckets) >= MAX_NAMESPACE_BUCKETS:
                self._forget_one(now)
            bucket = _Bucket(self.burst, now)
        bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.at) * self.per_second)
        bucket.at = now
        self._buckets[namespace] = bucket  # the most recently used last
        if bucket.tokens < count:
            return False
        bucket.tokens -= count
        return True

    def _forget_one(self, now: float) -> None:
        for name, bucket in self._buckets.items():
            if bucket.tokens + (now - bucket.at) * self.per_second >= self.burst:
                del self._buckets[name]
                return
        del self._buckets[next(iter(self._buckets))]


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
        self._known: dict[tuple[str, str], float] = {}
        self._in_flight: dict[tuple[str, str], asyncio.Future[None]] = {}
        self._rate = rate or NamespaceRate(per_second=20.0, burst=100.0)
        self._max_entries = max_entries
        self._prune_at = min(1024, max_entries)
        self.watching = False

    def forget(self) -> None:
        self._known.clear()

    def __len__(self) -> int:
        return len(self._known)

    def _remember(self, key: tuple[str, str], expires: float) -> None:
        self._known.pop(key, None)  # re-inserted: the newest entry comes last
        self._known[key] = expires
        if len(self._known) >= self._prune_at:
            now = self._clocks.monotonic()
            self._known = {k: t for k, t in self._known.items() if t > now}
            while len(self._known) >= self._max_entries:  # the oldest first
                del self._known[next(iter(self._known))]
            floor = min(1024, self._max_entries)
            self._prune_at = min(self._max_entries, max(floor, 2 * len(self._known)))

    async def keep_true(self, retry: float = 5.0, longest: float = 60.0) -> None:
        """Watch the webhook's templates; drop each one deleted from the cache (forever).
        A watch that cannot start is retried after `retry` seconds, doubling to `longest`."""
        wait = retry
        while True:
            broken = False
            try:
                async for event in self._api.watch_templates(MANAGED_SELECTOR):
                    kind = event.get("type")
                    if kind == "WATCHING":
                        self.forget()  # what was deleted before the watch began is unknown
                        self.watching = True
                        wait = retry
                    elif kind == "DELETED":
                        metadata = (event.get("object") or {}).get("metadata") or {}
                        key = (str(metadata.get("namespace")), str(metadata.get("name")))
                        self._known.pop(key, None)
            except ApiError as error:
                log.warning(
                    "watching ResourceClaimTemplates failed (%s); retrying in %gs", error, wait
                )
                broken = True
            self.watching = False
            self.forget()
            if broken:
                await asyncio.sleep(wait)
                wait = min(longest, wait * 2)

    async def ensure(
        self, namespace: str, templates: list[JsonObject], *, dry_run: bool, deadline: float
    ) -> list[str]:
        now = self._clocks.monotonic()
        missing = []
        for template in templates:
            expires = self._known.get((namespace, template["metadata"]["name"]))
            if expires is not None and expires > now:
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
        """Create it, or stamp last-used on the existing one; then cache it."""
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
        confirmed_at = self._clocks.monotonic()
        for _ in range(2):
            if await self._create(namespace, body, dry_run=False, deadline=deadline):
                break
            try:
                await self._api.annotate_template(
                    namespace, name, stamp, timeout=self._left(deadline, name)
                )
                break
            except ApiError as error:
                if error.status != 404:  # deleted since the 409: create it again
                    raise self._unavailable(error, namespace, name) from error
        else:
            raise TemplateUnavailable(
                503, f"ResourceClaimTemplate {namespace}/{name} keeps disappearing; retry"
            )
        self._remember((namespace, name), confirmed_at + self._ttl)

    async def _create(
        self, namespace: str, template: JsonObject, *, dry_run: bool, deadline: float
    ) -> bool:
        """True when created (or validated); False when it already exists."""
        name = template["metadata"]["name"]
        try:
            await self._api.create_template(
                namespace, template, dry_run=dry_run, timeout=self._left(deadline, name)
            )
        except ApiError as error:
            if error.status == 409:
                return False
            raise self._unavailable(error, namespace, name) from error
        if not dry_run:
            self._events.template_created()
            log.info("created ResourceClaimTemplate %s/%s", namespace, name)
        return True

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
