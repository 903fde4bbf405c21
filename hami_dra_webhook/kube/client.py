"""The one module that talks to the Kubernetes API (through the official `kubernetes` client).

Objects stay raw JSON dicts: the client's models would drop fields they do not know and cost
0.4 ms each to build. Blocking calls run in a small thread pool, never on the event loop, with
the client's own retries off so that the caller's deadline holds.
"""

from __future__ import annotations

import asyncio
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import quote

import kubernetes.client
import kubernetes.config
from kubernetes.client.exceptions import ApiException

from hami_dra_webhook.core.types import JsonObject
from hami_dra_webhook.kube.port import TEMPLATES_PATH, WORKLOAD_PATHS, ApiError

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
WEBHOOKS_PATH = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
FIELD_MANAGER = "hami-dra-webhook"


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def load_configuration(kubeconfig: str | None) -> kubernetes.client.Configuration | None:
    """From --kubeconfig, else the in-cluster service account, else None (offline)."""
    configuration = kubernetes.client.Configuration()
    if kubeconfig:
        kubernetes.config.load_kube_config(
            config_file=kubeconfig, client_configuration=configuration
        )
    elif in_cluster():
        kubernetes.config.load_incluster_config(client_configuration=configuration)
    else:
        return None
    configuration.retries = 0
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


def connect(kubeconfig: str | None, context: str | None = None) -> KubernetesApi:
    """The API for a command-line tool, found as kubectl finds it: --kubeconfig, else
    $KUBECONFIG, else ~/.kube/config, else the in-cluster service account."""
    configuration = kubernetes.client.Configuration()
    source = kubeconfig or _default_kubeconfig()
    try:
        if source is not None:
            kubernetes.config.load_kube_config(
                config_file=source, context=context, client_configuration=configuration
            )
        elif in_cluster():
            kubernetes.config.load_incluster_config(client_configuration=configuration)
        else:
            raise ClusterAccessError(
                "no cluster: no --kubeconfig, $KUBECONFIG or ~/.kube/config, and not in a pod"
            )
    except ClusterAccessError:
        raise
    except Exception as error:  # the client raises many kinds for a bad kubeconfig
        raise ClusterAccessError(f"cannot load cluster access from {source}: {error}") from error
    configuration.retries = 0
    return KubernetesApi(configuration)


class KubernetesApi:
    """`KubeApi` over HTTP with the `kubernetes` client's configuration, auth and TLS."""

    def __init__(self, configuration: kubernetes.client.Configuration, workers: int = 8) -> None:
        self._client = kubernetes.client.ApiClient(configuration)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kube-api")

    @property
    def host(self) -> str:
        return str(self._client.configuration.host)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()

    async def create_template(
        self, namespace: str, template: JsonObject, *, dry_run: bool, timeout: float
    ) -> JsonObject:
        query = [("fieldManager", FIELD_MANAGER)] + ([("dryRun", "All")] if dry_run else [])
        path = f"{TEMPLATES_PATH}/namespaces/{quote(namespace)}/resourceclaimtemplates"
        return await self._call("POST", path, query, template, timeout)

    async def annotate_template(
        self, namespace: str, name: str, annotations: dict[str, str], *, timeout: float
    ) -> JsonObject:
        path = (
            f"{TEMPLATES_PATH}/namespaces/{quote(namespace)}/resourceclaimtemplates/{quote(name)}"
        )
        body = {"metadata": {"annotations": annotations}}
        query = [("fieldManager", FIELD_MANAGER)]
        return await self._call("PATCH", path, query, body, timeout, content_type=MERGE_PATCH)

    async def list_templates(self, label_selector: str, *, timeout: float) -> list[JsonObject]:
        path = f"{TEMPLATES_PATH}/resourceclaimtemplates"
        return await self._list(path, [("labelSelector", label_selector)], timeout)

    async def list_pods(self, namespace: str, *, timeout: float) -> list[JsonObject]:
        return await self._list(f"/api/v1/namespaces/{quote(namespace)}/pods", [], timeout)

    async def delete_template(
        self, namespace: str, name: str, resource_version: str, *, timeout: float
    ) -> None:
        path = (
            f"{TEMPLATES_PATH}/namespaces/{quote(namespace)}/resourceclaimtemplates/{quote(name)}"
        )
        # The precondition makes the delete fail (409) when anyone touched it since we read it.
        body = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "preconditions": {"resourceVersion": resource_version},
        }
        await self._call("DELETE", path, [], body, timeout)

    async def list_device_classes(self, *, timeout: float) -> list[JsonObject]:
        return await self._list(f"{TEMPLATES_PATH}/deviceclasses", [], timeout)

    async def list_resource_slices(self, driver: str, *, timeout: float) -> list[JsonObject]:
        query = [("fieldSelector", f"spec.driver={driver}")]
        return await self._list(f"{TEMPLATES_PATH}/resourceslices", query, timeout)

    async def get_path(self, path: str, *, timeout: float) -> JsonObject:
        return await self._call("GET", path, [], None, timeout)

    async def list_path(
        self, path: str, query: list[tuple[str, str]], *, timeout: float
    ) -> list[JsonObject]:
        return await self._list(path, query, timeout)

    async def list_workloads(
        self, kind: str, namespace: str | None, *, timeout: float
    ) -> list[JsonObject]:
        prefix, resource = WORKLOAD_PATHS[kind]
        scope = f"/namespaces/{quote(namespace)}" if namespace else ""
        return await self._list(f"{prefix}{scope}/{resource}", [], timeout)

    async def version(self, *, timeout: float) -> JsonObject:
        return await self._call("GET", "/version", [], None, timeout)

    async def get_secret(self, namespace: str, name: str, *, timeout: float) -> JsonObject:
        path = f"/api/v1/namespaces/{quote(namespace)}/secrets/{quote(name)}"
        return await self._call("GET", path, [], None, timeout)

    async def replace_secret(self, secret: JsonObject, *, timeout: float) -> JsonObject:
        metadata = secret["metadata"]
        path = (
            f"/api/v1/namespaces/{quote(metadata['namespace'])}/secrets/{quote(metadata['name'])}"
        )
        return await self._call("PUT", path, [("fieldManager", FIELD_MANAGER)], secret, timeout)

    async def get_webhook_configuration(self, name: str, *, timeout: float) -> JsonObject:
        return await self._call("GET", f"{WEBHOOKS_PATH}/{quote(name)}", [], None, timeout)

    async def patch_webhook_configuration(
        self, name: str, operations: list[JsonObject], *, timeout: float
    ) -> JsonObject:
        path = f"{WEBHOOKS_PATH}/{quote(name)}"
        query = [("fieldManager", FIELD_MANAGER)]
        return await self._call("PATCH", path, query, operations, timeout, content_type=JSON_PATCH)

    async def _list(self, path: str, query: list[tuple[str, str]], timeout: float) -> list[Any]:
        items: list[Any] = []
        token = ""
        while True:
            page = query + [("limit", "500")] + ([("continue", token)] if token else [])
            answer = await self._call("GET", path, page, None, timeout)
            items += answer.get("items") or []
            token = (answer.get("metadata") or {}).get("continue") or ""
            if not token:
                return items

    async def _call(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]],
        body: Any,
        timeout: float,
        content_type: str = "application/json",
    ) -> JsonObject:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._pool, self._blocking_call, method, path, query, body, timeout, content_type
        )

    def _blocking_call(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]],
        body: Any,
        timeout: float,
        content_type: str,
    ) -> JsonObject:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            params = self._client.param_serialize(
                method=method,
                resource_path=path,
                query_params=query,
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            response = self._client.call_api(*params, _request_timeout=max(timeout, 0.001))
            data = response.read()
        except ApiException as error:
            raise ApiError(error.status or 0, "Unreachable", str(error.reason)) from error
        except Exception as error:  # urllib3: timeouts, refused and reset connections
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
