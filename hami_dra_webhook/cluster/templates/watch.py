"""Keeping the store's cache of confirmed templates true: a watch on the webhook's own
templates, of their metadata only (a template's spec is immutable: an object with the confirmed
uid has the confirmed spec). One changed by anyone leaves the cache at once; one deleted while
cached leaves it and, unless the garbage collector deleted it (it marks what it deletes, see
gc.py), is created again at once (it was confirmed within the cache TTL, so pods admitted in the
watch's lag may reference it). Each watch resumes where the last one ended (its
resourceVersion, bookmarks included), so the cache lives across them; when the watch breaks,
whatever broke it, or its version is gone (410), the cache is emptied (nothing seen meanwhile
can be trusted) and the watch starts again. An event too large to read (a tenant's object under
the webhook's label) is skipped and counted; the template it names leaves the cache."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Protocol

from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.translate.template_identity import DELETING_ANNOTATION, metadata_differs
from hami_dra_webhook.kube.port import ApiError, KubeApi

MANAGED_SELECTOR = "app.kubernetes.io/managed-by=hami-dra-webhook"
log = logging.getLogger("hami_dra_webhook.templates")
Key = tuple[str, str]  # (namespace, name)


class Confirmed(Protocol):
    """A cached confirmation, as the watch reads it."""

    @property
    def expires(self) -> float: ...
    @property
    def template(self) -> JsonObject: ...
    @property
    def uid(self) -> str: ...


class Cache(Protocol):
    def get(self, key: Key) -> Confirmed | None: ...
    def pop(self, key: Key) -> object: ...


class TemplateWatch:
    """The watch job (`run`) and what it says for /readyz: standing or not, in words, and how
    often it listed afresh (the first start, a 410) and resumed where it was."""

    def __init__(
        self,
        api: KubeApi,
        cache: Cache,
        forget: Callable[[], None],
        recreate: Callable[[str, str, JsonObject], Coroutine[None, None, None]],
        monotonic: Callable[[], float],
        on_oversized: Callable[[], None],
    ) -> None:
        self._api, self._known, self._forget = api, cache, forget
        self._recreate, self._monotonic, self._on_oversized = recreate, monotonic, on_oversized
        self._recreating: set[asyncio.Task[None]] = set()
        self.watching = False
        # From the first watch until one breaks: what is confirmed meanwhile may be kept, even
        # between two windows (the next resumes from the last version seen, so it shows what
        # happened in between; a 410 or a break empties the cache).
        self.keeps_cache = False
        self.watch_state = "not started"
        self.relists = self.resumes = self.oversized = 0

    async def run(self, retry: float = 5.0, longest: float = 60.0, window: int = 300) -> None:
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
                    self.keeps_cache = False
                    self._forget()
                    await asyncio.sleep(wait)
                    wait = min(longest, wait * 2)
        finally:
            self.watching = self.keeps_cache = False
            for task in self._recreating:
                task.cancel()

    def _watched(self, event: JsonObject, version: str) -> str:
        """Take one watch event; the resourceVersion to resume from after it."""
        kind = event.get("type")
        if kind == "WATCHING":
            if event.get("listed"):
                self._forget()  # a new start: what was deleted before it is unknown
                self.relists += 1
            else:
                self.resumes += 1
            self.watching = self.keeps_cache = True
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
        self._on_oversized()
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
            self._forget()

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
        if known.expires > self._monotonic() and DELETING_ANNOTATION not in annotations:
            task = asyncio.get_running_loop().create_task(self._recreate(*key, known.template))
            self._recreating.add(task)
            task.add_done_callback(self._recreating.discard)
