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
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import kubernetes.aio.client
import kubernetes.aio.config
from kubernetes.aio.client.exceptions import ApiException

from hami_dra_webhook.core.types import JsonObject
from hami_dra_webhook.kube.port import ApiError, in_cluster, paths

log = logging.getLogger(__name__)
# Items a list asks for at a time (kubectl asks for 500 too).
PAGE_SIZE = 500

JSON_PATCH = "application/json-patch+json"
FIELD_MANAGER = "hami-dra-webhook"
Configuration = kubernetes.aio.client.Configuration


async def load_configuration(kubeconfig: str | None) -> Configuration | None:
    """From --kubeconfig, else the in-cluster service account, else None (offline)."""
    configuration = Configuration()
    if kubeconfig:
        await kubernetes.aio.config.load_kube_config(
            config_file=kubeconfig, client_configuration=configuration, persist_config=False
        )
    elif in_cluster():
        kubernetes.aio.config.load_incluster_config(client_configuration=configuration)
    else:
        return None
    configuration.retries = None
    return configuration


class ClusterAccessError(RuntimeError):
    """No usable cluster access; the message says what to pass."""


def _default_kubeconfig() -> str | None:
    """$KUBECONFIG (a list of files, as kubectl reads it), else ~/.kube/config, if present."""
    named = os.environ.get("KUBECONFIG", "")
    if any(Path(p).expanduser().is_file() for p in named.split(os.pathsep) if p):
        return named
    home = Path("~/.kube/config").expanduser()
    return str(home) if home.is_file() else None


async def connect(kubeconfig: str | None, context: str | None = None) -> KubernetesApi:
    """The API for a command-line tool, found as kubectl finds it: --kubeconfig, else
    $KUBECONFIG, else ~/.kube/config, else the in-cluster service account."""
    configuration = Configuration()
    source = kubeconfig or _default_kubeconfig()
    try:
        if source is not None:
            await kubernetes.aio.config.load_kube_config(
                config_file=source,
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
        elif in_cluster():
            kubernetes.aio.config.load_incluster_config(client_configuration=configuration)
        else:
            raise ClusterAccessError(
                "no cluster: no --kubeconfig, $KUBECONFIG or ~/.kube/config, and not in a pod"
            )
    except ClusterAccessError:
        raise
    except Exception as error:  # the client raises many kinds for a bad kubeconfig
        raise ClusterAccessError(f"cannot load cluster access from {source}: {error}") from error
    configuration.retries = None
    return KubernetesApi(configuration)


class KubernetesApi:
    """`KubeApi` over HTTP with the `kubernetes` client's configuration, auth and TLS."""

    def __init__(self, configuration: Configuration, page_size: int = PAGE_SIZE) -> None:
        self._configuration = configuration
        self.page_size = page_size
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def host(self) -> str:
        return str(self._configuration.host)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

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

    async def get_template(self, namespace: str, name: str, *, timeout: float) -> JsonObject:
        return await self._call("GET", paths.template(namespace, name), [], None, timeout)

    async def patch_template(
        self, namespace: str, name: str, operations: list[JsonObject], *, timeout: float
    ) -> JsonObject:
        path = paths.template(namespace, name)
        query = [("fieldManager", FIELD_MANAGER)]
        return await self._call("PATCH", path, query, operations, timeout, content_type=JSON_PATCH)

    async def list_templates(self, label_selector: str, *, timeout: float) -> list[JsonObject]:
        return await self._list(paths.ALL_TEMPLATES, [("labelSelector", label_selector)], timeout)

    async def watch_templates(
        self, label_selector: str, resource_version: str = "", *, window: int = 300
    ) -> AsyncIterator[JsonObject]:
        """See KubeApi.watch_templates. One watch lasts `window` seconds (the server ends it);
        the caller resumes from the last resourceVersion it saw (bookmarks included)."""
        version, listed = resource_version, False
        if not version:
            answer = await self._call(
                "GET",
                paths.ALL_TEMPLATES,
                [("labelSelector", label_selector), ("limit", "1")],
                None,
                30.0,
            )
            version = str((answer.get("metadata") or {}).get("resourceVersion") or "")
            listed = True
        query = [
            ("labelSelector", label_selector),
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(window)),
            ("resourceVersion", version),
        ]
        client = self._api_client()
        try:
            params = await client.param_serialize(
                method="GET",
                resource_path=paths.ALL_TEMPLATES,
                query_params=query,
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
            )
            deadline = aiohttp.ClientTimeout(total=None, sock_read=window + 30)
            response = await client.call_api(*params, _request_timeout=deadline)
        except ApiException as error:
            raise ApiError(error.status or 0, "Unreachable", str(error.reason)) from error
        except Exception as error:  # aiohttp: refused and reset connections, TLS, DNS
            raise ApiError(0, type(error).__name__, str(error)[:300]) from error
        stream = response.response
        try:
            if response.status >= 300:
                raise ApiError.from_status(
                    response.status, json.loads(await stream.read() or b"{}")
                )
            yield {"type": "WATCHING", "resourceVersion": version, "listed": listed}
            while line := await stream.content.readline():
                event = json.loads(line)
                if event.get("type") == "ERROR":  # e.g. 410: the version is too old
                    raise ApiError.from_status(
                        int((event.get("object") or {}).get("code") or 0), event.get("object")
                    )
                yield event
        except (aiohttp.ClientError, TimeoutError, ValueError) as error:
            raise ApiError(0, type(error).__name__, str(error)[:300]) from error
        finally:
            stream.release()

    def pod_pages(self, namespace: str, *, timeout: float) -> AsyncIterator[list[JsonObject]]:
        return self._pages(paths.pods(namespace), [], timeout)

    async def delete_template(
        self, namespace: str, name: str, resource_version: str, *, timeout: float
    ) -> None:
        path = paths.template(namespace, name)
        # The precondition makes the delete fail (409) when anyone touched it since we read it.
        body = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "preconditions": {"resourceVersion": resource_version},
        }
        await self._call("DELETE", path, [], body, timeout)

    async def list_device_classes(self, *, timeout: float) -> list[JsonObject]:
        return await self._list(paths.DEVICE_CLASSES, [], timeout)

    async def list_resource_slices(self, driver: str, *, timeout: float) -> list[JsonObject]:
        query = [("fieldSelector", f"spec.driver={driver}")]
        return await self._list(paths.RESOURCE_SLICES, query, timeout)

    async def get_path(self, path: str, *, timeout: float) -> JsonObject:
        return await self._call("GET", path, [], None, timeout)

    async def list_path(
        self, path: str, query: list[tuple[str, str]], *, timeout: float
    ) -> list[JsonObject]:
        return await self._list(path, query, timeout)

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

    async def get_webhook_configuration(self, name: str, *, timeout: float) -> JsonObject:
        path = paths.webhook_configuration(name)
        return await self._call("GET", path, [], None, timeout)

    async def patch_webhook_configuration(
        self, name: str, operations: list[JsonObject], *, timeout: float
    ) -> JsonObject:
        path = paths.webhook_configuration(name)
        query = [("fieldManager", FIELD_MANAGER)]
        return await self._call("PATCH", path, query, operations, timeout, content_type=JSON_PATCH)

    async def _list(self, path: str, query: list[tuple[str, str]], timeout: float) -> list[Any]:
        return [item async for page in self._pages(path, query, timeout) for item in page]

    async def _pages(
        self, path: str, query: list[tuple[str, str]], timeout: float
    ) -> AsyncIterator[list[Any]]:
        """A collection `page_size` items at a time, following `continue`; when a token
        expires mid-way (410), on with the token the server gives for that (the rest is read
        from a newer snapshot: objects created or deleted meanwhile may be missed or doubled,
        which a report can live with), else the 410 is raised."""
        token = ""
        while True:
            page = (
                query + [("limit", str(self.page_size))] + ([("continue", token)] if token else [])
            )
            try:
                answer = await self._call("GET", path, page, None, timeout)
            except ApiError as error:
                if error.status != 410 or not token or not error.continue_token:
                    raise
                log.warning("listing %s: the continue token expired; going on inconsistently", path)
                token = error.continue_token
                continue
            items = answer.get("items")
            yield items if isinstance(items, list) else []
            token = (answer.get("metadata") or {}).get("continue") or ""
            if not token:
                return

    async def _call(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]],
        body: Any,
        timeout: float,
        content_type: str = "application/json",
    ) -> JsonObject:
        client = self._api_client()
        headers = {"Accept": "application/json"}
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
            data = await response.read()
        except ApiException as error:
            raise ApiError(error.status or 0, "Unreachable", str(error.reason)) from error
        except TimeoutError as error:
            raise ApiError(0, "Timeout", f"no answer within {timeout:g}s") from error
        except Exception as error:  # aiohttp: refused and reset connections, TLS, DNS
            raise ApiError(0, type(error).__name__, str(error)[:300]) from error
        try:
            document = json.loads(data) if data else {}
        except ValueError:
            document = {}
        if response.status >= 300:
            raise ApiError.from_status(response.status, document)
        if not isinstance(document, dict):
            raise ApiError(response.status, "BadResponse", "the answer is not a JSON object")
        return document
