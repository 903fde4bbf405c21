"""What the webhook needs from the Kubernetes API, as a Protocol (`client.py` implements it),
and every API path it uses, built in one place with each name quoted."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any, Protocol
from urllib.parse import quote

from hami_dra_webhook.core.model.types import JsonObject

TEMPLATES_PATH = "/apis/resource.k8s.io/v1"
# Workload kind -> (API prefix, resource).
WORKLOAD_PATHS = {
    "Deployment": ("/apis/apps/v1", "deployments"),
    "StatefulSet": ("/apis/apps/v1", "statefulsets"),
    "DaemonSet": ("/apis/apps/v1", "daemonsets"),
    "ReplicaSet": ("/apis/apps/v1", "replicasets"),
    "Job": ("/apis/batch/v1", "jobs"),
    "CronJob": ("/apis/batch/v1", "cronjobs"),
    "Pod": ("/api/v1", "pods"),
}


def in_cluster() -> bool:
    """Running in a pod (the client library is not imported to find out: it costs ~40 MiB)."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def _name(value: str) -> str:
    return quote(value, safe="")


class paths:  # noqa: N801 (a namespace of functions, read as paths.template(...))
    """Every API path the project uses; names and namespaces are quoted (no `..`, `/`, `?`
    reaches the URL as such)."""

    DRA_GROUP = TEMPLATES_PATH
    WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
    VALIDATING_WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
    RESOURCE_QUOTAS = "/api/v1/resourcequotas"
    DEVICE_CLASSES = f"{TEMPLATES_PATH}/deviceclasses"
    RESOURCE_SLICES = f"{TEMPLATES_PATH}/resourceslices"
    ALL_TEMPLATES = f"{TEMPLATES_PATH}/resourceclaimtemplates"
    VERSION = "/version"
    NODES = "/api/v1/nodes"
    ALL_PODS = "/api/v1/pods"
    NAMESPACES = "/api/v1/namespaces"
    ALL_CLAIMS = f"{TEMPLATES_PATH}/resourceclaims"
    ALL_DISRUPTION_BUDGETS = "/apis/policy/v1/poddisruptionbudgets"

    @staticmethod
    def node(name: str) -> str:
        return f"{paths.NODES}/{_name(name)}"

    @staticmethod
    def eviction(namespace: str, name: str) -> str:
        return f"{paths.pods(namespace)}/{_name(name)}/eviction"

    @staticmethod
    def namespace(name: str) -> str:
        return f"/api/v1/namespaces/{_name(name)}"

    @staticmethod
    def templates(namespace: str) -> str:
        return f"{TEMPLATES_PATH}/namespaces/{_name(namespace)}/resourceclaimtemplates"

    @staticmethod
    def template(namespace: str, name: str) -> str:
        return f"{paths.templates(namespace)}/{_name(name)}"

    @staticmethod
    def device_class(name: str) -> str:
        return f"{paths.DEVICE_CLASSES}/{_name(name)}"

    @staticmethod
    def pods(namespace: str) -> str:
        return f"/api/v1/namespaces/{_name(namespace)}/pods"

    @staticmethod
    def pod(namespace: str, name: str) -> str:
        return f"{paths.pods(namespace)}/{_name(name)}"

    @staticmethod
    def claim(namespace: str, name: str) -> str:
        return f"{paths.claims(namespace)}/{_name(name)}"

    @staticmethod
    def claims(namespace: str) -> str:
        return f"{TEMPLATES_PATH}/namespaces/{_name(namespace)}/resourceclaims"

    @staticmethod
    def resource_quotas(namespace: str) -> str:
        return f"/api/v1/namespaces/{_name(namespace)}/resourcequotas"

    @staticmethod
    def events(namespace: str) -> str:
        return f"/api/v1/namespaces/{_name(namespace)}/events"

    @staticmethod
    def lease(namespace: str, name: str) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{_name(namespace)}/leases/{_name(name)}"

    @staticmethod
    def leases(namespace: str) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{_name(namespace)}/leases"

    @staticmethod
    def secret(namespace: str, name: str) -> str:
        return f"/api/v1/namespaces/{_name(namespace)}/secrets/{_name(name)}"

    @staticmethod
    def device_taint_rules(version: str) -> str:
        """DeviceTaintRules in one version of resource.k8s.io (v1 from 1.37; v1beta2, v1alpha3)."""
        return f"/apis/resource.k8s.io/{_name(version)}/devicetaintrules"

    @staticmethod
    def device_taint_rule(version: str, name: str) -> str:
        return f"{paths.device_taint_rules(version)}/{_name(name)}"

    @staticmethod
    def config_map(namespace: str, name: str) -> str:
        return f"/api/v1/namespaces/{_name(namespace)}/configmaps/{_name(name)}"

    @staticmethod
    def webhook_configuration(name: str, validating: bool = False) -> str:
        return f"{paths.VALIDATING_WEBHOOKS if validating else paths.WEBHOOKS}/{_name(name)}"

    @staticmethod
    def cluster_role_binding(name: str) -> str:
        return f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{_name(name)}"

    @staticmethod
    def endpoint_slices(namespace: str) -> str:
        return f"/apis/discovery.k8s.io/v1/namespaces/{_name(namespace)}/endpointslices"

    @staticmethod
    def workloads(kind: str, namespace: str | None) -> str:
        """A workload kind's collection (WORKLOAD_PATHS), in one namespace or all of them."""
        prefix, resource = WORKLOAD_PATHS[kind]
        scope = f"/namespaces/{_name(namespace)}" if namespace else ""
        return f"{prefix}{scope}/{resource}"


class ApiError(Exception):
    """A failed API call: `status` is the HTTP status, 0 when no answer came (network, timeout)."""

    def __init__(self, status: int, reason: str, message: str, continue_token: str = "") -> None:
        super().__init__(f"{status} {reason}: {message}" if status else f"{reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        # A 410 to a paged list whose `continue` expired may carry a token that goes on
        # without a consistent snapshot (Kubernetes API concepts: "inconsistent continue").
        self.continue_token = continue_token
        # The call that failed ("GET https://host/path"), where the adapter knows it.
        self.request = ""
        # Whether the answer was a Kubernetes `Status` (False: the server is likely no API
        # server at all, or a proxy in front of it).
        self.from_kubernetes = True

    @classmethod
    def from_status(cls, status: int, body: Any) -> ApiError:
        """From a response and its `Status` body (kind: Status, reason, message) when it has one."""
        reason, message, token = "", "", ""
        status_body = isinstance(body, dict) and body.get("kind") == "Status"
        if status_body:
            reason = str(body.get("reason") or "")
            message = str(body.get("message") or "")
            metadata = body.get("metadata")
            if isinstance(metadata, dict):
                token = str(metadata.get("continue") or "")
        error = cls(status, reason or _REASONS.get(status, "Error"), message or "no message", token)
        error.from_kubernetes = status_body
        return error


class AnswerTooLarge(ApiError):
    """An answer larger than the caller would read (`size` bytes or more, `limit` allowed): it
    was not read. `continue_token` is a list page's, when its head had one."""

    def __init__(self, size: int, limit: int, continue_token: str = "") -> None:
        super().__init__(
            0, "TooLarge", f"the answer is {size} bytes or more (at most {limit} are read)"
        )
        self.size = size
        self.limit = limit
        self.continue_token = continue_token


_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "AlreadyExists",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class KubeApi(Protocol):
    """The calls the webhook makes; every call takes a timeout in seconds."""

    # Items of paged lists that were too large to read even alone, and were skipped.
    skipped_items: int

    async def create_template(
        self, namespace: str, template: JsonObject, *, dry_run: bool, timeout: float
    ) -> JsonObject: ...

    async def get_template(
        self, namespace: str, name: str, *, timeout: float, max_bytes: int | None = None
    ) -> JsonObject:
        """With `max_bytes`, a larger stored object is not read: AnswerTooLarge."""
        ...

    async def patch_template(
        self, namespace: str, name: str, operations: list[JsonObject], *, timeout: float
    ) -> JsonObject:
        """An RFC 6902 JSON patch: a `test` operation that does not hold makes it fail (422)."""
        ...

    def template_metadata_pages(
        self, label_selector: str, *, timeout: float
    ) -> AsyncIterator[list[JsonObject]]:
        """The metadata (PartialObjectMetadata) of the templates the selector matches, in every
        namespace, a page at a time, each answer read within a bound: an item too large to
        read alone is skipped and counted in `skipped_items`."""
        ...

    def watch_templates(
        self, label_selector: str, resource_version: str = "", *, window: int = 300
    ) -> AsyncIterator[JsonObject]:
        """Events of the templates the selector matches, in every namespace: from
        `resource_version`, or from now (a list gives the version) when it is empty. First
        `{"type": "WATCHING", "resourceVersion": ..., "listed": bool}` once the watch stands,
        then ADDED, MODIFIED, DELETED and BOOKMARK events of each object's metadata only
        (PartialObjectMetadata), and `{"type": "OVERSIZED", "size", "namespace", "name"}` for an
        event too large to read (namespace and name empty when unknown); it ends after about
        `window` seconds, or raises ApiError when the watch breaks, whatever broke it (410 when
        `resource_version` is too old)."""
        ...

    def pod_pages(
        self, namespace: str, *, timeout: float, field_selector: str = ""
    ) -> AsyncIterator[list[JsonObject]]:
        """The namespace's pods (those `field_selector` selects), a page at a time, each answer
        read within a bound: a pod too large to read alone is skipped and counted in
        `skipped_items`."""
        ...

    async def delete_template(
        self,
        namespace: str,
        name: str,
        resource_version: str,
        *,
        timeout: float,
        dry_run: bool = False,
    ) -> None:
        """Delete that version (409 if it changed); `dry_run`: the server checks, keeps it."""
        ...

    async def list_device_classes(self, *, timeout: float) -> list[JsonObject]: ...

    async def list_resource_slices(self, driver: str, *, timeout: float) -> list[JsonObject]: ...

    async def get_path(self, path: str, *, timeout: float) -> JsonObject:
        """Any object or discovery document by its API path (read-only tooling)."""
        ...

    def path_pages(
        self, path: str, query: list[tuple[str, str]], *, timeout: float
    ) -> AsyncIterator[list[JsonObject]]:
        """A collection a page at a time, each answer read within a bound (as pod_pages)."""
        ...

    async def list_path(
        self, path: str, query: list[tuple[str, str]], *, timeout: float
    ) -> list[JsonObject]:
        """Every item of a collection path, following `continue` (read-only tooling)."""
        ...

    async def list_versioned(
        self, path: str, query: list[tuple[str, str]], *, timeout: float
    ) -> tuple[list[JsonObject], str]:
        """Every item of a collection path and the resourceVersion to watch it from ("" when
        an item too large to read was skipped: the items are not the whole collection)."""
        ...

    def watch_path(
        self,
        path: str,
        query: list[tuple[str, str]],
        resource_version: str = "",
        *,
        window: int = 300,
        metadata_only: bool = False,
    ) -> AsyncIterator[JsonObject]:
        """Events of a collection path (`query`: its selectors), as watch_templates gives
        them: from `resource_version`, or from now when it is empty; first a WATCHING event,
        then ADDED, MODIFIED, DELETED, BOOKMARK, and OVERSIZED for an event too large to read;
        `metadata_only`: objects as PartialObjectMetadata. It ends after about `window`
        seconds, or raises ApiError when the watch breaks (410 when the version is too old)."""
        ...

    def workload_pages(
        self, kind: str, namespace: str | None, *, timeout: float
    ) -> AsyncIterator[list[JsonObject]]:
        """Objects of a workload kind (WORKLOAD_PATHS), in one namespace or all of them, a page
        (`limit`) at a time: a cluster of 50,000 pods is never held at once."""
        ...

    async def version(self, *, timeout: float) -> JsonObject: ...

    async def get_secret(self, namespace: str, name: str, *, timeout: float) -> JsonObject: ...

    async def replace_secret(self, secret: JsonObject, *, timeout: float) -> JsonObject:
        """PUT with the secret's resourceVersion: a concurrent writer makes it fail with 409."""
        ...

    async def get_webhook_configuration(
        self, name: str, *, timeout: float, validating: bool = False
    ) -> JsonObject:
        """The Mutating (or, `validating`, the Validating) WebhookConfiguration named."""
        ...

    async def patch_pod(
        self, namespace: str, name: str, operations: list[JsonObject], *, timeout: float
    ) -> JsonObject:
        """An RFC 6902 JSON patch of a pod (a gate's removal, behind a `test` of it)."""
        ...

    async def patch_namespace(
        self, name: str, merge_patch: JsonObject, *, timeout: float
    ) -> JsonObject:
        """A JSON merge patch of a Namespace (the quota label)."""
        ...

    async def create_object(self, path: str, body: JsonObject, *, timeout: float) -> JsonObject:
        """POST to a collection path (an Event, a Lease): 409 when the name is taken."""
        ...

    async def replace_object(self, path: str, body: JsonObject, *, timeout: float) -> JsonObject:
        """PUT with the body's resourceVersion: a concurrent writer makes it fail with 409."""
        ...

    async def delete_path(self, path: str, *, timeout: float) -> None:
        """DELETE one object, in the background (its dependents and finalizers after): 404
        when it is gone (a node move's canary pod and claim)."""
        ...

    async def patch_node(self, name: str, merge_patch: JsonObject, *, timeout: float) -> JsonObject:
        """A JSON merge patch (RFC 7386) of a Node: labels, annotations, spec.unschedulable
        (`migrate node`)."""
        ...

    async def evict(
        self, namespace: str, name: str, *, timeout: float, dry_run: bool = False
    ) -> None:
        """Ask the Eviction API to evict a pod: 429 when a PodDisruptionBudget forbids it now,
        404 when the pod is gone (`migrate node`); `dry_run`: the server answers, evicts
        nothing."""
        ...

    async def patch_webhook_configuration(
        self,
        name: str,
        operations: list[JsonObject],
        *,
        timeout: float,
        validating: bool = False,
    ) -> JsonObject:
        """An RFC 6902 JSON patch (its `test` operations make it fail with 422 when stale)."""
        ...
