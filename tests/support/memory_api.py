"""An in-memory Kubernetes API for the cluster loops' tests in process (issue 66's in-process
tier) and for the benchmarks: the `KubeApi` calls the GPU quota work, its Lease and its watches,
the template store and its garbage collector, node moves and fleets make, answered as
kube-apiserver answers them, in milliseconds.

A stand-in, and what it keeps of kube-apiserver's behaviour is what those loops lean on:

- one store of objects by API path, and a resourceVersion counter as etcd's revision: every
  write stamps the object's `metadata.resourceVersion` (and a create its uid and
  creationTimestamp); a namespaced object needs its Namespace (404 without);
- lists paged by `limit`, read at one revision (later writes are not in the later pages);
- watches from a resourceVersion: a WATCHING event (the adapter's own, kube/port.py), then the
  events after it; 410 when the version is older than the history kept (`compact`); an object
  that starts or stops matching the watch's selectors arrives as ADDED or DELETED, as the
  watch cache sends it; `metadata_only` gives PartialObjectMetadata; a watch ends after its
  window, or with the error given to `break_watches`;
- optimistic concurrency: a PUT whose resourceVersion is stale answers 409, a create of a
  taken name 409, a delete whose resourceVersion precondition fails 409, a JSON patch whose
  `test` fails 422, a read or write of what is not there 404, a read larger than the caller's
  bound AnswerTooLarge; a pod's scheduling gates can be removed, never added (as its
  validation); a dry-run create checks and stores nothing; an eviction answers 429 while a
  PodDisruptionBudget that selects the pod allows no disruption, else the pod goes at once;
- label and field selectors on lists and watches (tests/support/memory_selectors.py).

What no loop here leans on is not kept (admission, defaulting, garbage collection, the
controllers): each loop keeps tests on a real kube-apiserver for those, its wiring, its
policies and RBAC. `calls` counts each call by name, as a test's assertion of what a loop
asks."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any

import jsonpatch
import orjson

from hami_dra_webhook.core.model import kube_time, label_selector
from hami_dra_webhook.kube.port import AnswerTooLarge, ApiError, paths
from tests.support.memory_selectors import selected as _selected

JsonObject = dict[str, Any]
Key = tuple[str, str]  # (namespace, name)
PAGE = 100  # items a page when a list names no limit (MemoryApi.page)


def _copy(item: Any) -> Any:
    """What a client reads: the object decoded afresh from its JSON text."""
    return orjson.loads(orjson.dumps(item))


@dataclass(frozen=True)
class Where:
    """An API path read as kube-apiserver routes it."""

    collection: str  # "/api/v1/pods", "/apis/resource.k8s.io/v1/resourceclaims": the kind's
    namespace: str  # "" for a cluster-wide list or a cluster-scoped kind
    name: str  # "" for a collection

    @staticmethod
    def of(path: str) -> Where:
        parts = path.strip("/").split("/")
        prefix_length = 2 if parts[0] == "api" else 3
        prefix, rest = "/" + "/".join(parts[:prefix_length]), parts[prefix_length:]
        if rest[:1] == ["namespaces"] and len(rest) >= 3:
            name = rest[3] if len(rest) > 3 else ""
            return Where(f"{prefix}/{rest[2]}", rest[1], name)
        return Where(f"{prefix}/{rest[0]}", "", rest[1] if len(rest) > 1 else "")


@dataclass
class Change:
    revision: int
    kind: str  # ADDED, MODIFIED, DELETED
    collection: str
    before: JsonObject | None
    after: JsonObject  # the object as it was deleted, for DELETED


@dataclass
class MemoryApi:
    page: int = PAGE  # items a page when a list names no limit (the real client asks 500)
    skipped_items: int = 0
    revision: int = 1000
    compacted: int = 0  # changes at or before this revision are gone from the history
    calls: Counter[str] = field(default_factory=Counter)
    _objects: dict[str, dict[Key, JsonObject]] = field(default_factory=dict)
    _history: list[Change] = field(default_factory=list)
    _changed: asyncio.Event | None = None
    _breaks: list[ApiError] = field(default_factory=list)  # each break_watches's error

    # -- the store, as a test writes and reads it ------------------------------------------

    def put(self, path: str, body: JsonObject) -> JsonObject:
        """Create `body` in the collection at `path` as a client's POST would (no admission)."""
        return self._create(Where.of(path), body)

    def namespaces(self, *names: str) -> MemoryApi:
        """These Namespaces made (a namespaced object needs its own), as a test's cluster
        starts with them."""
        for name in names:
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            self.put(paths.NAMESPACES, body)
        return self

    def replace(self, path: str, body: JsonObject) -> JsonObject:
        """`body` written over the object of that name in the collection at `path`, as a
        client's PUT does (409 when its resourceVersion is stale), from a test's own code."""
        collection = Where.of(path)
        metadata = body.get("metadata") or {}
        where = Where(collection.collection, collection.namespace, str(metadata.get("name", "")))
        stored = self._stored(where)
        given = str(metadata.get("resourceVersion") or "")
        if given and given != stored["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "the object has been modified; apply your changes")
        return self._update(where, stored, body)

    def objects(self, path: str) -> list[JsonObject]:
        where = Where.of(path)
        return [_copy(o) for o in self._matching(where, [])]

    def compact(self) -> None:
        """Forget the history up to now: a watch from an older version answers 410."""
        self.compacted, self._history = self.revision, []

    def break_watches(self, error: ApiError) -> None:
        """End every watch open now with `error` (a dropped connection, a restarted server);
        later watches stand."""
        self._breaks.append(error)
        self._wake()

    # -- reads ---------------------------------------------------------------------------------

    async def get_path(self, path: str, *, timeout: float) -> JsonObject:
        self.calls["get_path"] += 1
        where = Where.of(path)
        found = self._objects.get(where.collection, {}).get((where.namespace, where.name))
        if found is None:
            raise ApiError(404, "NotFound", f"{path} not found")
        return _copy(found)

    async def list_path(
        self, path: str, query: list[tuple[str, str]], *, timeout: float
    ) -> list[JsonObject]:
        self.calls["list_path"] += 1
        return [_copy(o) for o in self._matching(Where.of(path), query)]

    async def list_versioned(
        self, path: str, query: list[tuple[str, str]], *, timeout: float
    ) -> tuple[list[JsonObject], str]:
        self.calls["list_versioned"] += 1
        items = [_copy(o) for o in self._matching(Where.of(path), query)]
        return items, str(self.revision)

    async def path_pages(
        self, path: str, query: list[tuple[str, str]], *, timeout: float
    ) -> AsyncIterator[list[JsonObject]]:
        self.calls["path_pages"] += 1
        async for page in self._pages(Where.of(path), query):
            yield page

    async def pod_pages(
        self, namespace: str, *, timeout: float, field_selector: str = ""
    ) -> AsyncIterator[list[JsonObject]]:
        self.calls["pod_pages"] += 1
        query = [("fieldSelector", field_selector)] if field_selector else []
        async for page in self._pages(Where.of(paths.pods(namespace)), query):
            yield page

    async def get_webhook_configuration(
        self, name: str, *, timeout: float, validating: bool = False
    ) -> JsonObject:
        self.calls["get_webhook_configuration"] += 1
        return await self.get_path(paths.webhook_configuration(name, validating), timeout=timeout)

    async def list_resource_slices(self, driver: str, *, timeout: float) -> list[JsonObject]:
        self.calls["list_resource_slices"] += 1
        where = Where.of(paths.RESOURCE_SLICES)
        return [
            _copy(s)
            for s in self._matching(where, [])
            if (s.get("spec") or {}).get("driver") == driver
        ]

    async def _pages(
        self, where: Where, query: list[tuple[str, str]]
    ) -> AsyncIterator[list[JsonObject]]:
        """Every page read at the revision of the first (as a `continue` token keeps it)."""
        limit = int(dict(query).get("limit") or self.page)
        items = self._matching(where, query)  # stored objects are replaced, never changed
        for start in range(0, len(items), limit):
            yield [_copy(item) for item in items[start : start + limit]]
            await asyncio.sleep(0)  # another writer may come in between pages

    # -- watches -------------------------------------------------------------------------------

    async def watch_path(
        self,
        path: str,
        query: list[tuple[str, str]],
        resource_version: str = "",
        *,
        window: int = 300,
        metadata_only: bool = False,
    ) -> AsyncIterator[JsonObject]:
        self.calls["watch_path"] += 1
        where = Where.of(path)
        since = int(resource_version) if resource_version else self.revision
        if since < self.compacted:
            raise ApiError(410, "Expired", f"too old resource version: {since}")
        yield {"type": "WATCHING", "resourceVersion": str(since), "listed": not resource_version}
        ends, breaks = time.monotonic() + window, len(self._breaks)
        while True:
            for change in [c for c in self._history if c.revision > since]:
                since = change.revision
                event = _event(change, where, query)
                if event is not None:
                    yield _slim(event) if metadata_only else event
            if len(self._breaks) > breaks:
                raise self._breaks[-1]
            left = ends - time.monotonic()
            if left <= 0:
                return
            await self._wait(left)

    async def _wait(self, seconds: float) -> None:
        if self._changed is None:
            self._changed = asyncio.Event()
        changed = self._changed
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await changed.wait()

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    # -- writes --------------------------------------------------------------------------------

    async def create_object(self, path: str, body: JsonObject, *, timeout: float) -> JsonObject:
        self.calls["create_object"] += 1
        return self._create(Where.of(path), body)

    async def replace_object(self, path: str, body: JsonObject, *, timeout: float) -> JsonObject:
        self.calls["replace_object"] += 1
        return self.replace(path, body)

    async def patch_pod(
        self, namespace: str, name: str, operations: list[JsonObject], *, timeout: float
    ) -> JsonObject:
        self.calls["patch_pod"] += 1
        where = Where.of(paths.pod(namespace, name))
        stored = self._stored(where)
        patched = _json_patched(stored, operations)
        if not set(_gates(patched)) <= set(_gates(stored)):
            raise ApiError(422, "Invalid", "spec.schedulingGates: only deletion is allowed")
        return self._update(where, stored, patched)

    # -- ResourceClaimTemplates, as the template store and its collector ask for them ---------

    async def create_template(
        self, namespace: str, template: JsonObject, *, dry_run: bool, timeout: float
    ) -> JsonObject:
        self.calls["create_template"] += 1
        where = Where.of(paths.templates(namespace))
        if not dry_run:
            return self._create(where, template)
        name = str((template.get("metadata") or {}).get("name") or "")
        if (namespace, name) in self._objects.get(where.collection, {}):
            raise ApiError(409, "AlreadyExists", f"{name} already exists")
        if not self._namespace_exists(namespace):
            raise ApiError(404, "NotFound", f'namespaces "{namespace}" not found')
        return _copy(template)

    async def get_template(
        self, namespace: str, name: str, *, timeout: float, max_bytes: int | None = None
    ) -> JsonObject:
        self.calls["get_template"] += 1
        found = self._stored(Where.of(paths.template(namespace, name)))
        size = len(orjson.dumps(found))
        if max_bytes is not None and size > max_bytes:
            raise AnswerTooLarge(size, max_bytes)
        return _copy(found)

    async def patch_template(
        self, namespace: str, name: str, operations: list[JsonObject], *, timeout: float
    ) -> JsonObject:
        self.calls["patch_template"] += 1
        where = Where.of(paths.template(namespace, name))
        stored = self._stored(where)
        return self._update(where, stored, _json_patched(stored, operations))

    async def template_metadata_pages(
        self, label_selector: str, *, timeout: float
    ) -> AsyncIterator[list[JsonObject]]:
        self.calls["template_metadata_pages"] += 1
        where, query = Where.of(paths.ALL_TEMPLATES), [("labelSelector", label_selector)]
        async for page in self._pages(where, query):
            yield [_slim({"object": item})["object"] for item in page]

    def watch_templates(
        self, label_selector: str, resource_version: str = "", *, window: int = 300
    ) -> AsyncIterator[JsonObject]:
        query = [("labelSelector", label_selector)]
        return self.watch_path(
            paths.ALL_TEMPLATES, query, resource_version, window=window, metadata_only=True
        )

    async def delete_template(
        self,
        namespace: str,
        name: str,
        resource_version: str,
        *,
        timeout: float,
        dry_run: bool = False,
    ) -> None:
        self.calls["delete_template"] += 1
        path = paths.template(namespace, name)
        stored = self._stored(Where.of(path))
        if resource_version and stored["metadata"]["resourceVersion"] != resource_version:
            raise ApiError(409, "Conflict", "Precondition failed: the resourceVersion changed")
        if not dry_run:
            self.delete(path)

    async def workload_pages(
        self, kind: str, namespace: str | None, *, timeout: float
    ) -> AsyncIterator[list[JsonObject]]:
        self.calls["workload_pages"] += 1
        async for page in self._pages(Where.of(paths.workloads(kind, namespace)), []):
            yield page

    async def patch_namespace(
        self, name: str, merge_patch: JsonObject, *, timeout: float
    ) -> JsonObject:
        self.calls["patch_namespace"] += 1
        where = Where.of(paths.namespace(name))
        stored = self._stored(where)
        return self._update(where, stored, _merge(stored, merge_patch))

    async def patch_node(self, name: str, merge_patch: JsonObject, *, timeout: float) -> JsonObject:
        self.calls["patch_node"] += 1
        where = Where.of(paths.node(name))
        stored = self._stored(where)
        return self._update(where, stored, _merge(stored, merge_patch))

    async def evict(
        self, namespace: str, name: str, *, timeout: float, dry_run: bool = False
    ) -> None:
        """The Eviction API: 429 while a PodDisruptionBudget that selects the pod allows no
        disruption; else the pod goes (at once: no kubelet here to take its grace period)."""
        self.calls["evict"] += 1
        path = paths.pod(namespace, name)
        pod = self._stored(Where.of(path))
        labels = (pod.get("metadata") or {}).get("labels") or {}
        for budget in self._matching(Where.of(paths.ALL_DISRUPTION_BUDGETS), []):
            if budget["metadata"].get("namespace") != namespace:
                continue
            spec, status = budget.get("spec") or {}, budget.get("status") or {}
            if label_selector.matches(spec.get("selector"), labels) and not (
                int(status.get("disruptionsAllowed") or 0) > 0
            ):
                raise ApiError(
                    429,
                    "TooManyRequests",
                    "Cannot evict pod as it would violate"
                    f" the pod's disruption budget {budget['metadata']['name']}.",
                )
        if not dry_run:
            self.delete(path)

    async def delete_path(self, path: str, *, timeout: float) -> None:
        self.calls["delete_path"] += 1
        self.delete(path)

    def delete(self, path: str) -> None:
        """Delete the object at `path` at once (no finalizers, no grace: a forced delete)."""
        where = Where.of(path)
        stored = self._stored(where)
        del self._objects[where.collection][(where.namespace, where.name)]
        self._record("DELETED", where.collection, stored, self._stamp(_copy(stored)))

    def _create(self, where: Where, body: JsonObject) -> JsonObject:
        item = _copy(body)
        metadata = item.setdefault("metadata", {})
        if not metadata.get("name") and metadata.get("generateName"):
            metadata["name"] = f"{metadata['generateName']}{uuid.uuid4().hex[:5]}"
        namespace = where.namespace or str(metadata.get("namespace") or "")
        if where.namespace:
            metadata["namespace"] = namespace
        key = (namespace, str(metadata.get("name") or ""))
        kept = self._objects.setdefault(where.collection, {})
        if not key[1]:
            raise ApiError(422, "Invalid", "metadata.name: Required value")
        if key in kept:
            raise ApiError(409, "AlreadyExists", f"{key[1]} already exists")
        if where.namespace and not self._namespace_exists(where.namespace):
            raise ApiError(404, "NotFound", f'namespaces "{where.namespace}" not found')
        metadata["uid"] = str(uuid.uuid4())
        metadata["creationTimestamp"] = kube_time.stamp()
        kept[key] = self._stamp(item)
        self._record("ADDED", where.collection, None, item)
        return _copy(item)

    def _update(self, where: Where, stored: JsonObject, body: JsonObject) -> JsonObject:
        item = _copy(body)
        metadata = item.setdefault("metadata", {})
        for kept in ("uid", "creationTimestamp", "namespace", "name"):
            if kept in stored["metadata"]:
                metadata[kept] = stored["metadata"][kept]
        if _same(item, stored):  # no change: no new version, no event (as kube-apiserver)
            return _copy(stored)
        self._objects[where.collection][(where.namespace, where.name)] = self._stamp(item)
        self._record("MODIFIED", where.collection, stored, item)
        return _copy(item)

    def _namespace_exists(self, name: str) -> bool:
        return ("", name) in self._objects.get(Where.of(paths.NAMESPACES).collection, {})

    def _stored(self, where: Where) -> JsonObject:
        found = self._objects.get(where.collection, {}).get((where.namespace, where.name))
        if found is None:
            raise ApiError(404, "NotFound", f"{where.collection} {where.name!r} not found")
        return found

    def _stamp(self, item: JsonObject) -> JsonObject:
        self.revision += 1
        item["metadata"]["resourceVersion"] = str(self.revision)
        return item

    def _record(
        self, kind: str, collection: str, before: JsonObject | None, after: JsonObject
    ) -> None:
        self._history.append(Change(self.revision, kind, collection, before, after))
        self._wake()

    def _matching(self, where: Where, query: Iterable[tuple[str, str]]) -> list[JsonObject]:
        found = self._objects.get(where.collection, {})
        items = [
            item
            for (namespace, name), item in sorted(found.items())
            if (not where.namespace or namespace == where.namespace)
            and (not where.name or name == where.name)
        ]
        return [item for item in items if _selected(item, query)]


def _event(change: Change, where: Where, query: list[tuple[str, str]]) -> JsonObject | None:
    """The watch event a change is to a watch of `where` with `query` (None: not its)."""
    if change.collection != where.collection:
        return None
    namespace = str(change.after["metadata"].get("namespace", ""))
    if where.namespace and namespace != where.namespace:
        return None
    now = _selected(change.after, query)
    was = change.before is not None and _selected(change.before, query)
    if change.kind == "DELETED":
        kind = "DELETED" if now else None
    elif now:
        kind = "MODIFIED" if was else "ADDED"
    else:
        kind = "DELETED" if was else None
    return None if kind is None else {"type": kind, "object": _copy(change.after)}


def _slim(event: JsonObject) -> JsonObject:
    item = event["object"]
    meta = {"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata"}
    return {**event, "object": {**meta, "metadata": item.get("metadata", {})}}


def _json_patched(stored: JsonObject, operations: list[JsonObject]) -> JsonObject:
    """An RFC 6902 patch applied to a copy; 422 when a `test` fails or a path is not there."""
    try:
        patched: JsonObject = jsonpatch.apply_patch(stored, operations)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as error:
        raise ApiError(422, "Invalid", str(error)) from None
    return patched


def _gates(pod: JsonObject) -> list[str]:
    return [str(g.get("name")) for g in (pod.get("spec") or {}).get("schedulingGates") or []]


def _same(a: JsonObject, b: JsonObject) -> bool:
    def comparable(item: JsonObject) -> str:
        metadata = {k: v for k, v in item["metadata"].items() if k != "resourceVersion"}
        return json.dumps({**item, "metadata": metadata}, sort_keys=True)

    return comparable(a) == comparable(b)


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return _copy(patch)
    merged = _copy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = _merge(merged.get(key), value)
    return merged
