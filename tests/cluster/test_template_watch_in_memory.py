"""The template cache kept true by its watch, in process (issue 66's in-process tier): the
template store and its watch against the in-memory API (tests/support/memory_api.py). The same
behaviour on the real kube-apiserver, with its watch cache's lag and its bookmarks, is
tests/cluster/test_template_watch.py."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from hami_dra_webhook.cluster.templates.gc import collect_garbage
from hami_dra_webhook.cluster.templates.store import ApiTemplateStore
from hami_dra_webhook.kube.port import ApiError, paths
from tests.support.api_calls import CallsThrough
from tests.support.loop import run
from tests.support.memory_api import MemoryApi
from tests.support.templates import templates

TEAM = "team"


def _cluster() -> MemoryApi:
    api = MemoryApi()
    api.namespaces(TEAM)
    return api


async def _until(check: Any, what: str, within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.01)


async def _ensure(store: ApiTemplateStore, items: list[dict[str, Any]]) -> None:
    await store.ensure(TEAM, items, dry_run=False, deadline=time.monotonic() + 5)


def test_a_template_deleted_by_anyone_while_in_use_is_created_again_at_once() -> None:
    api = _cluster()
    calls = CallsThrough(api)  # type: ignore[arg-type]
    store = ApiTemplateStore(calls, cache_ttl=300)  # type: ignore[arg-type]
    items = templates(4000, TEAM)
    name = items[0]["metadata"]["name"]

    async def scenario() -> int:
        watching = asyncio.create_task(store.watch.run())
        try:
            await _until(lambda: store.watching, "the watch stands")
            await _ensure(store, items)
            await _ensure(store, items)  # cached: no API call
            creates = calls.calls["create_template"]
            api.delete(paths.template(TEAM, name))  # someone else deletes it
            await _until(lambda: calls.calls["create_template"] > creates, "created again")
            await _until(lambda: _names(api) == [name], "it is back")
            await _ensure(store, items)  # cached again
            return calls.calls["create_template"] - creates
        finally:
            watching.cancel()
            await asyncio.gather(watching, return_exceptions=True)

    assert run(scenario()) == 1


def test_a_template_the_garbage_collector_deletes_is_not_created_again() -> None:
    api = _cluster()
    calls = CallsThrough(api)  # type: ignore[arg-type]
    store = ApiTemplateStore(calls, cache_ttl=300)  # type: ignore[arg-type]
    items = templates(4200, TEAM)

    async def scenario() -> tuple[int, list[str]]:
        watching = asyncio.create_task(store.watch.run())
        try:
            await _until(lambda: store.watching, "the watch stands")
            await _ensure(store, items)
            creates = calls.calls["create_template"]
            report = await collect_garbage(api, now=time.time() + 7200, grace=1)  # type: ignore[arg-type]
            await _until(lambda: not len(store), "the cache lets it go")
            await asyncio.sleep(0.2)  # a re-creation would have happened by now
            return calls.calls["create_template"] - creates, report.deleted
        finally:
            watching.cancel()
            await asyncio.gather(watching, return_exceptions=True)

    recreated, deleted = run(scenario())
    assert deleted == [f"{TEAM}/{items[0]['metadata']['name']}"]
    assert recreated == 0 and _names(api) == []


def test_a_watch_that_breaks_empties_the_cache_and_stands_again() -> None:
    api = _cluster()
    store = ApiTemplateStore(api, cache_ttl=300)  # type: ignore[arg-type]
    items = templates(4300, TEAM)

    async def scenario() -> tuple[int, int, bool]:
        watching = asyncio.create_task(store.watch.run(retry=0.05))
        try:
            await _until(lambda: store.watching, "the watch stands")
            await _ensure(store, items)
            cached = len(store)
            api.break_watches(ApiError(0, "Disconnected", "the server went away"))
            await _until(lambda: not len(store), "the cache emptied")
            await _until(lambda: store.watching, "the watch stands again")
            return cached, len(store), store.watching
        finally:
            watching.cancel()
            await asyncio.gather(watching, return_exceptions=True)

    assert run(scenario()) == (1, 0, True)


def _names(api: MemoryApi) -> list[str]:
    return [t["metadata"]["name"] for t in api.objects(paths.templates(TEAM))]
