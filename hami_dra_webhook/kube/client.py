"""The one module that talks to the Kubernetes API, through the official client's asyncio
flavour (`kubernetes.aio`, on aiohttp).

Objects stay raw JSON dicts: the client's models would drop fields they do not know and cost
0.4 ms each to build. Calls run on the event loop (no thread pool that a slow API could fill),
each with its own deadline, with the client's retries off so that the caller's deadline holds.
One `KubernetesApi` serves one event loop (aiohttp sessions belong to the loop they start on).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import aiohttp
import kubernetes.aio.client
import kubernetes.aio.config
from kubernetes.aio.client.exceptions import ApiException

from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.kube.no_answer import failure, named, no_answer
from hami_dra_webhook.kube.paging import MAX_PAGE_BYTES, ListPages
from hami_dra_webhook.kube.port import ApiError, paths
from hami_dra_webhook.kube.streams import Oversized, json_or_empty, lines, read_capped

log = logging.getLogger(__name__)
# Items a list asks for at a time (kubectl asks for 500 too).
PAGE_SIZE = 500
# What is read of objects that tenants write (issue 34): any one answer to a list, at most
# MAX_PAGE_BYTES (a larger one is asked again with half as many items, down to one); one watch
# event, at most MAX_EVENT_BYTES (a larger one is skipped and reported as OVERSIZED). A
# namespace editor's object can be ~1.5 MB as written and ~9 MB as served (`&` in an annotation
# is served as `\u0026`); the webhook's own template metadata is under 2 KiB. MAX_PAGE_BYTES
# lives with the paging (kube/paging.py).
MAX_EVENT_BYTES = 1 << 20
# Metadata only (PartialObjectMetadata): labels, annotations, finalizers, owners, deletion.
AS_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
AS_METADATA_LIST = (
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
)
JSON = "application/json"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
FIELD_MANAGER = "hami-dra-webhook"
Configuration = kubernetes.aio.client.Configuration
# How long close() waits for the connections this adapter closed itself (a watch that ended,
# an answer too large to read) to finish closing: over TLS a close waits for the server's
# close_notify, and a loop that ends first leaves their sockets unclosed (ResourceWarning).
CLOSE_WAIT = 2.0


class KubernetesApi(ListPages):
    """`KubeApi` over HTTP with the `kubernetes` client's configuration, auth and TLS."""

    def __init__(self, configuration: Configuration, page_size: int = PAGE_SIZE) -> None:
        self._configuration = configuration
        self.page_size = page_size
        self.skipped_items = 0  # items of lists larger than MAX_PAGE_BYTES alone, skipped
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing: set[asyncio.Future[Any]] = set()

    @property
    def host(self) -> str:
        return str(self._configuration.host)

    async def close(self) -> None:
        """The session closed (its pooled connections waited for, by aiohttp), and the
        connections closed outside the pool waited for too, at most CLOSE_WAIT seconds."""
        if self._client is not None:
            await self._client.close()
            self._client = None
        pending = [closed for closed in self._closing if not closed.done()]
        self._closing.clear()
        if pending:
            await asyncio.wait(pending, timeout=CLOSE_WAIT)

    def _close_alone(self, response: Any) -> None:
        """Close a response's connection (not back to the pool), remembered for close()."""
        connection = getattr(response, "connection", None)
        closed = getattr(getattr(connection, "protocol", None), "closed", None)
        response.close()
        if isinstance(closed, asyncio.Future) and not closed.done():
            self._closing = {c for c in self._closing if not c.done()}
            self._closing.add(closed)

    def _api_client(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._client is None:
            self._client = kubernetes.aio.client.ApiClient(self._configuration)
            self._loop = loop
        elif loop is not self._loop:
            raise RuntimeError("a KubernetesApi serves the one event loop it started on")
        return self._client

    async def create_template(
        self, namespace: str, template: JsonObject, *, dry_run: bool, timeout: float
    ) -> JsonObject:
        query = [("fieldManager", FIELD_MANAGER)] + ([("dryRun", "All")] if dry_run else [])
        return await self._call("POST", paths.templates(namespace), query, template, timeout)

    async def get_template(
        self, namespace: str, name: str, *, timeout: float, max_bytes: int | None = None
    ) -> JsonObject:
        path = paths.template(namespace, name)
        return await self._call("GET", path, [], None, timeout, max_bytes=max_bytes)

    async def patch_template(
        self, namespace: str, name: str, operations: list[JsonObject], *, timeout: float
    ) -> JsonObject:
        path = paths.template(namespace, name)
        query = [("fieldManager", FIELD_MANAGER)]
        return await self._call("PATCH", path, query, operations, timeout, content_type=JSON_PATCH)

    def template_metadata_pages(
        self, label_selector: str, *, timeout: float
    ) -> AsyncIterator[list[JsonObject]]:
        """See KubeApi.template_metadata_pages."""
        query = [("labelSelector", label_selector)]
        return self._pages(paths.ALL_TEMPLATES, query, timeout, accept=AS_METADATA_LIST)

    def watch_templates(
        self, label_selector: str, resource_version: str = "", *, window: int = 300
    ) -> AsyncIterator[JsonObject]:
        """See KubeApi.watch_templates: their metadata only (a template's spec is immutable)."""
        query = [("labelSelector", label_selector)]
        return self.watch_path(
            paths.ALL_TEMPLATES, query, resource_version, window=window, metadata_only=True
        )

    async def watch_path(
        self,
        path: str,
        query: list[tuple[str, str]],
        resource_version: str = "",
        *,
        window: int = 300,
        metadata_only: bool = False,
    ) -> AsyncIterator[JsonObject]:
        """See KubeApi.watch_path. One watch lasts `window` seconds (the server ends it); the
        caller resumes from the last resourceVersion it saw (bookmarks included). Each event
        is read within MAX_EVENT_BYTES; every failure of the stream, whatever it is, is an
        ApiError."""
        version, listed = resource_version, False
        if not version:
            answer = await self._call(
                "GET",
                path,
                [*query, ("limit", "1")],
                None,
                30.0,
                accept=AS_METADATA_LIST if metadata_only else JSON,
                max_bytes=MAX_PAGE_BYTES,
            )
            version = str((answer.get("metadata") or {}).get("resourceVersion") or "")
            listed = True
        accept = AS_METADATA if metadata_only else JSON
        response = await self._open_watch(path, query, version, window, accept)
        stream = response.response
        try:
            if response.status >= 300:
                body = await read_capped(stream, MAX_PAGE_BYTES, self._close_alone)
                raise ApiError.from_status(response.status, json_or_empty(body))
            yield {"type": "WATCHING", "resourceVersion": version, "listed": listed}
            async for line in lines(stream.content, MAX_EVENT_BYTES):
                if isinstance(line, Oversized):
                    yield line.event()
                    continue
                event = json.loads(line)
                if not isinstance(event, dict):
                    raise ApiError(0, "BadResponse", "a watch event is not a JSON object")
                if event.get("type") == "ERROR":  # e.g. 410: the version is too old
                    status = event.get("object")
                    code = status.get("code") if isinstance(status, dict) else 0
                    raise ApiError.from_status(int(code) if isinstance(code, int) else 0, status)
                yield event
        except ApiError:
            raise
        except asyncio.CancelledError:
            raise
        except Exception as error:  # aiohttp's errors, bad JSON, anything the stream holds
            raise no_answer(error) from error
        finally:
            self._close_alone(stream)  # not released to the pool: the rest is not wanted

    async def _open_watch(
        self, path: str, query: list[tuple[str, str]], version: str, window: int, accept: str
    ) -> Any:
        """The watch's response, its stream not read yet (any failure an ApiError)."""
        watch = [
            *query,
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(window)),
            ("resourceVersion", version),
        ]
        client = self._api_client()
        try:
            params = await client.param_serialize(
                method="GET",
                resource_path=path,
                query_params=watch,
                header_params={"Accept": accept, "Accept-Encoding": "identity"},
                auth_settings=["BearerToken"],
            )
            deadline = aiohttp.ClientTimeout(total=None, sock_read=window + 30)
            response = await client.call_api(*params, _request_timeout=deadline)
        except ApiException as error:
            raise ApiError(error.status or 0, "Unreachable", str(error.reason)) from error
        except Exception as error:  # aiohttp: refused and reset connections, TLS, DNS
            raise no_answer(error) from error
        return response

    def pod_pages(
        self, namespace: str, *, timeout: float, field_selector: str = ""
    ) -> AsyncIterator[list[JsonObject]]:
        query = [("fieldSelector", field_selector)] if field_selector else []
        return self._pages(paths.pods(namespace), query, timeout)

    async def delete_template(
        self,
        namespace: str,
        name: str,
        resource_version: str,
        *,
        timeout: float,
        dry_run: bool = False,
    ) -> None:
        path = paths.template(namespace, name)
        # The precondition makes the delete fail (409) when anyone touched it since we read it.
        body: JsonObject = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "preconditions": {"resourceVersion": resource_version},
        }
        if dry_run:  # in the body: kube-apiserver reads a DELETE's options from its body
            body["dryRun"] = ["All"]
        query = [("dryRun", "All")] if dry_run else []
        await self._call("DELETE", path, query, body, timeout)

    async def list_device_classes(self, *, timeout: float) -> list[JsonObject]:
        return await self._list(paths.DEVICE_CLASSES, [], timeout)

    async def list_resource_slices(self, driver: str, *, timeout: float) -> list[JsonObject]:
        query = [("fieldSelector", f"spec.driver={driver}")]
        return await self._list(paths.RESOURCE_SLICES, query, timeout)

    async def get_path(self, path: str, *, timeout: float) -> JsonObject:
        return await self._call("GET", path, [], None, timeout)

    def path_pages(
        self, path: str, query: list[tuple[str, str]], *, timeout: float
    ) -> AsyncIterator[list[JsonObject]]:
        return self._pages(path, query, timeout)

    async def list_path(
        self, path: str, query: list[tuple[str, str]], *, timeout: float
    ) -> list[JsonObject]:
        return await self._list(path, query, timeout)

    async def list_versioned(
        self, path: str, query: list[tuple[str, str]], *, timeout: float
    ) -> tuple[list[JsonObject], str]:
        return await self._listing(path, query, timeout)

    def workload_pages(
        self, kind: str, namespace: str | None, *, timeout: float
    ) -> AsyncIterator[list[JsonObject]]:
        return self._pages(paths.workloads(kind, namespace), [], timeout)

    async def version(self, *, timeout: float) -> JsonObject:
        return await self._call("GET", paths.VERSION, [], None, timeout)

    async def get_secret(self, namespace: str, name: str, *, timeout: float) -> JsonObject:
        return await self._call("GET", paths.secret(namespace, name), [], None, timeout)

    async def replace_secret(self, secret: JsonObject, *, timeout: float) -> JsonObject:
        metadata = secret["metadata"]
        path = paths.secret(metadata["namespace"], metadata["name"])
        return await self._call("PUT", path, [("fieldManager", FIELD_MANAGER)], secret, timeout)

    async def get_webhook_configuration(
        self, name: str, *, timeout: float, validating: bool = False
    ) -> JsonObject:
        path = paths.webhook_configuration(name, validating)
        return await self._call("GET", path, [], None, timeout)

    async def patch_webhook_configuration(
        self,
        name: str,
        operations: list[JsonObject],
        *,
        timeout: float,
        validating: bool = False,
    ) -> JsonObject:
        path = paths.webhook_configuration(name, validating)
        query = [("fieldManager", FIELD_MANAGER)]
        return await self._call("PATCH", path, query, operations, timeout, content_type=JSON_PATCH)

    async def patch_pod(
        self, namespace: str, name: str, operations: list[JsonObject], *, timeout: float
    ) -> JsonObject:
        query = [("fieldManager", FIELD_MANAGER)]
        return await self._call(
            "PATCH", paths.pod(namespace, name), query, operations, timeout, content_type=JSON_PATCH
        )

    async def patch_namespace(
        self, name: str, merge_patch: JsonObject, *, timeout: float
    ) -> JsonObject:
        query = [("fieldManager", FIELD_MANAGER)]
        return await self._call(
            "PATCH", paths.namespace(name), query, merge_patch, timeout, content_type=MERGE_PATCH
        )

    async def create_object(self, path: str, body: JsonObject, *, timeout: float) -> JsonObject:
        return await self._call("POST", path, [("fieldManager", FIELD_MANAGER)], body, timeout)

    async def replace_object(self, path: str, body: JsonObject, *, timeout: float) -> JsonObject:
        metadata = body["metadata"]
        path = f"{path}/{quote(str(metadata['name']), safe='')}"
        return await self._call("PUT", path, [("fieldManager", FIELD_MANAGER)], body, timeout)

    async def patch_node(self, name: str, merge_patch: JsonObject, *, timeout: float) -> JsonObject:
        query = [("fieldManager", FIELD_MANAGER)]
        return await self._call(
            "PATCH", paths.node(name), query, merge_patch, timeout, content_type=MERGE_PATCH
        )

    async def delete_path(self, path: str, *, timeout: float) -> None:
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
        await self._call("DELETE", path, [], body, timeout)

    async def evict(
        self, namespace: str, name: str, *, timeout: float, dry_run: bool = False
    ) -> None:
        body: JsonObject = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        if dry_run:
            body["deleteOptions"] = {"dryRun": ["All"]}
        query = [("dryRun", "All")] if dry_run else []
        await self._call("POST", paths.eviction(namespace, name), query, body, timeout)

    async def _list(self, path: str, query: list[tuple[str, str]], timeout: float) -> list[Any]:
        return [item async for page in self._pages(path, query, timeout) for item in page]

    async def _call(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]],
        body: Any,
        timeout: float,
        content_type: str = "application/json",
        accept: str = "application/json",
        max_bytes: int | None = None,
    ) -> JsonObject:
        """One call; with `max_bytes`, an answer larger than that is not read (AnswerTooLarge,
        with the continue token of a list page when its head has one)."""
        client = self._api_client()
        headers = {"Accept": accept}
        if max_bytes is not None:
            # Not compressed: the bound is then on what is read and held, and a small gzip of
            # a tenant's repetitive object never decompresses into many megabytes at once.
            headers["Accept-Encoding"] = "identity"
        if body is not None:
            headers["Content-Type"] = content_type
        deadline = aiohttp.ClientTimeout(total=max(timeout, 0.001))
        try:
            params = await client.param_serialize(
                method=method,
                resource_path=path,
                query_params=query,
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            response = await client.call_api(*params, _request_timeout=deadline)
            if max_bytes is None:
                data = await response.read()
            else:
                async with asyncio.timeout(max(timeout, 0.001)):
                    data = await read_capped(response.response, max_bytes, self._close_alone)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # every failure an ApiError naming the call
            raise failure(error, timeout, f"{method} {self.host}{path}") from error
        document = json_or_empty(data)
        if response.status >= 300:
            raise named(ApiError.from_status(response.status, document), method, self.host, path)
        if not isinstance(document, dict):
            raise ApiError(response.status, "BadResponse", "the answer is not a JSON object")
        return document
