"""Reading a collection a page at a time (kube/client.py's lists): the pages follow the
`continue` token, each answer read within MAX_PAGE_BYTES, and the next page is asked for while
the caller works on the current one."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.kube.port import AnswerTooLarge, ApiError
from hami_dra_webhook.kube.streams import lean_items

log = logging.getLogger("hami_dra_webhook.kube.client")
JSON = "application/json"
MAX_PAGE_BYTES = 4 << 20  # any one answer to a list (kube/client.py says why)


class ListPages:
    """Mixed into kube/client.KubernetesApi, which gives the one call every page goes through
    (`_call(method, path, query, body, timeout, accept=..., max_bytes=...)`)."""

    page_size: int
    skipped_items: int  # items of lists larger than MAX_PAGE_BYTES alone, skipped
    _call: Callable[..., Awaitable[JsonObject]]

    async def _pages(
        self, path: str, query: list[tuple[str, str]], timeout: float, accept: str = JSON
    ) -> AsyncIterator[list[Any]]:
        """A collection `page_size` items at a time, following `continue`; when a token
        expires mid-way (410), on with the token the server gives for that (the rest is read
        from a newer snapshot: objects created or deleted meanwhile may be missed or doubled,
        which a report can live with), else the 410 is raised.

        Each answer is read within MAX_PAGE_BYTES: a larger one is asked again with half as
        many items. A single item that is larger still is skipped (the list goes on with the
        page's continue token) and counted in `skipped_items`; a caller that must see every
        item checks it (the garbage collector keeps what it cannot see).

        The next page is asked for while the caller works on this one."""
        fetch = asyncio.ensure_future(self._page(path, query, "", self.page_size, timeout, accept))
        try:
            while True:
                items, token, limit, _ = await fetch
                if token:
                    fetch = asyncio.ensure_future(
                        self._page(path, query, token, limit, timeout, accept)
                    )
                if items is not None:
                    yield items
                if not token:
                    return
        finally:
            if not fetch.done():
                fetch.cancel()
            elif not fetch.cancelled():
                fetch.exception()  # retrieved: the caller stopped before it was needed

    async def _page(
        self,
        path: str,
        query: list[tuple[str, str]],
        token: str,
        limit: int,
        timeout: float,
        accept: str,
    ) -> tuple[list[Any] | None, str, int, str]:
        """One page from `token`: its items (None: its one item was too large, skipped), the
        next page's token ("" at the end) and size, and the list's resourceVersion."""
        while True:
            page = query + [("limit", str(limit))] + ([("continue", token)] if token else [])
            try:
                answer = await self._call(
                    "GET", path, page, None, timeout, accept=accept, max_bytes=MAX_PAGE_BYTES
                )
            except AnswerTooLarge as error:
                if limit > 1:
                    limit = max(1, limit // 2)
                    continue
                self.skipped_items += 1
                log.warning("listing %s: skipped an item larger than %d bytes", path, error.size)
                return None, error.continue_token or "", limit, ""
            except ApiError as error:
                if error.status != 410 or not token or not error.continue_token:
                    raise
                log.warning("listing %s: the continue token expired; going on inconsistently", path)
                token = error.continue_token
                continue
            metadata = answer.get("metadata") or {}
            following = metadata.get("continue") or ""
            version = str(metadata.get("resourceVersion") or "")
            return (
                lean_items(answer.get("items")),
                following,
                min(self.page_size, limit * 2),
                version,
            )

    async def _listing(
        self, path: str, query: list[tuple[str, str]], timeout: float
    ) -> tuple[list[Any], str]:
        """Every item of a collection, and the resourceVersion to watch it from: the first
        page's (a paged list is one snapshot, at that version). When an item is skipped (too
        large) or a continue token expired mid-way, the version is "" (not one snapshot)."""
        items: list[Any] = []
        token, limit, version, whole = "", self.page_size, "", True
        while True:
            page, token, limit, seen = await self._page(path, query, token, limit, timeout, JSON)
            if page is None:
                whole = False
            else:
                items += page
            version = version or seen
            if not token:
                return items, version if whole else ""
