"""A collection kept up to date by list and watch, as client-go's informers keep theirs: listed
once (when the consumer needs the objects) and then watched, each watch resuming from the last
resourceVersion seen (bookmarks included), listed again only when the version is gone (410) or
the watch broke. The consumer gets every object listed (`on_list`, also on each new list, with
what was there before to be forgotten) and every event (`on_event`); a consumer that needs
only to hear of changes is told on each new start that it may have missed some (`on_list` with
None). An event too large to read (a tenant's object: the bound is the adapter's) is reported
(`on_oversized`), never fatal. The loop never dies: a failure waits `retry` seconds, doubling
to `longest`, and starts again.

The GPU quota work watches ResourceQuotas (every replica: admission decides from them), the
Lease (replicas waiting for it), and pods and ResourceClaims (the replica that holds the Lease:
what changes a namespace's count)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.kube.port import ApiError, KubeApi

log = logging.getLogger("hami_dra_webhook.watch")
EVENTS = ("ADDED", "MODIFIED", "DELETED")


def _ignore_list(items: list[JsonObject] | None) -> None:
    return None


def _ignore_event(kind: str, item: JsonObject) -> None:
    return None


def _ignore_oversized(event: JsonObject) -> None:
    return None


@dataclass
class Watched:
    api: KubeApi
    path: str
    query: list[tuple[str, str]]
    name: str  # in the log: what is watched
    lists: bool = True  # list the objects first (False: from now on, events only)
    metadata_only: bool = False
    on_list: Callable[[list[JsonObject] | None], None] = _ignore_list
    on_event: Callable[[str, JsonObject], None] = _ignore_event
    on_oversized: Callable[[JsonObject], None] = _ignore_oversized
    timeout: float = 30.0
    synced: bool = False  # listed (or started) and watching now
    state: str = "not started"
    starts: int = 0  # lists or fresh starts (the first one, and each after a 410 or a break)
    _version: str = field(default="", repr=False)

    async def run(self, retry: float = 1.0, longest: float = 30.0, window: int = 300) -> None:
        """Forever: list (or start from now), then watch, window after window."""
        wait = retry
        try:
            while True:
                try:
                    await self._once(window)
                    wait = retry
                except Exception as error:  # whatever broke it: start again, never a dead job
                    if not isinstance(error, ApiError) or error.status == 410:
                        self._version = ""  # gone from the server's history, or unknown
                    self.synced = False
                    self.state = f"down: {error}; retrying in {wait:g}s"[:300]
                    log.warning("watching %s failed (%s); retrying in %gs", self.name, error, wait)
                    await asyncio.sleep(wait)
                    wait = min(longest, wait * 2)
        finally:
            self.synced = False

    async def _once(self, window: int) -> None:
        """One window: a list first when there is no version to resume from."""
        if not self._version and self.lists:
            items, version = await self.api.list_versioned(
                self.path, self.query, timeout=self.timeout
            )
            if not version:  # an item too large to read: not the whole collection
                raise ApiError(0, "Incomplete", f"{self.name}: an object too large to read")
            self.on_list(items)
            self.starts += 1
            self._version = version
        events = self.api.watch_path(
            self.path, self.query, self._version, window=window, metadata_only=self.metadata_only
        )
        async for event in events:
            kind = event.get("type")
            if kind == "WATCHING":
                if event.get("listed"):  # started from now: what happened before is unknown
                    self.starts += 1
                    self.on_list(None)
                self._version = str(event.get("resourceVersion") or self._version)
                self.synced = True
                self.state = f"watching from resourceVersion {self._version}"
                continue
            if kind == "OVERSIZED":
                log.warning("skipped a %s watch event too large to read", self.name)
                self.on_oversized(event)
                continue
            item = event.get("object")
            item = item if isinstance(item, dict) else {}
            if kind in EVENTS:
                self.on_event(str(kind), item)
            metadata = item.get("metadata")
            seen = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
            if seen:
                self._version = str(seen)


@dataclass
class Kept:
    """The objects of a Watched collection, by (namespace, name): its `on_list` and
    `on_event`."""

    items: dict[tuple[str, str], JsonObject] = field(default_factory=dict)

    def listed(self, items: list[JsonObject] | None) -> None:
        if items is not None:
            self.items = {_key(item): item for item in items}

    def seen(self, kind: str, item: JsonObject) -> None:
        if kind == "DELETED":
            self.items.pop(_key(item), None)
        else:
            self.items[_key(item)] = item


def _key(item: JsonObject) -> tuple[str, str]:
    metadata = item.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    return str(metadata.get("namespace", "")), str(metadata.get("name", ""))
