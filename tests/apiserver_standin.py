"""An HTTP server that stands in for kube-apiserver, which cannot run on these machines.

It speaks the API's real wire format for the calls hami-dra-webhook makes: JSON objects with
`metadata.resourceVersion`, `uid` and `creationTimestamp`; `Status` bodies with `reason` and
`code` on errors (404 NotFound, 409 AlreadyExists / Conflict on a failed precondition, 403
Forbidden, 500 InternalError, 429 with Retry-After); `?dryRun=All` that validates and stores
nothing; merge-patch; DELETE with `preconditions.resourceVersion`; list with `labelSelector`,
`limit` and `continue`. Faults are set per test: `fail[(method, kind)] = status`, a delay, a
reset connection, or dropping consumable capacity as 1.34/1.35 do with the gate off.
"""

from __future__ import annotations

import contextlib
import copy
import json
import threading
import time
import uuid
from collections import Counter
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

TEMPLATES = "/apis/resource.k8s.io/v1"
REASONS = {
    403: "Forbidden",
    404: "NotFound",
    409: "AlreadyExists",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
}


def status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


class StandIn:
    """State and faults; `url` after `start()`."""

    def __init__(self) -> None:
        self.templates: dict[tuple[str, str], dict[str, Any]] = {}
        self.pods: dict[str, list[dict[str, Any]]] = {}
        self.device_classes: list[dict[str, Any]] = []
        self.resource_slices: list[dict[str, Any]] = []
        # Read-only documents by path (discovery, lists of other kinds): GET answers them.
        self.static: dict[str, Any] = {}
        self.secrets: dict[tuple[str, str], dict[str, Any]] = {}
        self.webhook_configurations: dict[str, dict[str, Any]] = {}
        self.fail: dict[tuple[str, str], int] = {}
        self.delay: dict[tuple[str, str], float] = {}
        self.reset: set[tuple[str, str]] = set()
        self.truncate: set[tuple[str, str]] = set()  # headers and half a body, then a close
        self.drop_capacity = False
        # Called (once, then removed) before a request of that (method, kind) is handled.
        self.before: dict[tuple[str, str], Any] = {}
        # The first requests of that (method, kind) wait here for each other: a race on demand.
        self.gate: dict[tuple[str, str], threading.Barrier] = {}
        self.calls: Counter[tuple[str, str]] = Counter()
        self.log: list[tuple[str, str, str]] = []
        self.now: float | None = None  # a fixed creationTimestamp clock, for GC tests
        self.token = "standin-token"
        self._version = 1000
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.connections: set[Any] = set()

    # -- lifecycle
    def start(self) -> StandIn:
        standin = self

        class Handler(_Handler):
            state = standin

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop listening and cut open keep-alive connections: the API is now unreachable."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            for connection in list(self.connections):
                with contextlib.suppress(OSError):
                    connection.shutdown(2)

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def kubeconfig(self, folder: Path) -> Path:
        path = folder / "kubeconfig"
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "standin", "cluster": {"server": self.url}}],
                    "users": [{"name": "webhook", "user": {"token": self.token}}],
                    "contexts": [
                        {"name": "standin", "context": {"cluster": "standin", "user": "webhook"}}
                    ],
                    "current-context": "standin",
                }
            )
        )
        return path

    # -- helpers for tests
    def next_version(self) -> str:
        with self._lock:
            self._version += 1
            return str(self._version)

    def timestamp(self) -> str:
        return datetime.fromtimestamp(
            self.now if self.now is not None else time.time(), UTC
        ).strftime("%Y-%m-%dT%H:%M:%SZ")

    def count(self, method: str, kind: str) -> int:
        return self.calls[(method, kind)]


class _Handler(BaseHTTPRequestHandler):
    state: StandIn
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        self.state.connections.add(self.connection)

    def finish(self) -> None:
        self.state.connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def _send(self, code: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _fail(self, code: int, message: str, reason: str | None = None) -> None:
        headers = {"Retry-After": "1"} if code == 429 else None
        self._send(
            code, status_body(code, reason or REASONS.get(code, "Unknown"), message), headers
        )

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length)) if length else None

    def _route(self, method: str) -> None:
        state = self.state
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        parts = url.path.strip("/").split("/")
        kind = _kind(parts)
        body = self._body() if method in ("POST", "PATCH", "DELETE", "PUT") else None
        state.calls[(method, kind)] += 1
        state.log.append((method, kind, url.path))
        if self.headers.get("Authorization") != f"Bearer {state.token}":
            return self._fail(401, "Unauthorized", "Unauthorized")
        hook = state.before.pop((method, kind), None)
        if hook is not None:
            hook()
        gate = state.gate.get((method, kind))
        if gate is not None:
            with contextlib.suppress(threading.BrokenBarrierError):
                gate.wait(timeout=5)
            state.gate.pop((method, kind), None)  # once: later requests pass
        if (method, kind) in state.delay:
            time.sleep(state.delay[(method, kind)])
        if (method, kind) in state.reset:
            self.connection.shutdown(2)  # a connection reset mid-request
            self.close_connection = True
            return None
        if (method, kind) in state.truncate:
            self.send_response(201)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b'{"kind": "ResourceClaimTemplate", "meta')
            self.wfile.flush()
            self.connection.shutdown(2)
            self.close_connection = True
            return None
        if (method, kind) in state.fail:
            code = state.fail[(method, kind)]
            return self._fail(code, f"stand-in fault {code} on {method} {kind}")
        if method == "GET" and url.path in state.static:
            document = state.static[url.path]
            if isinstance(document, list):
                return self._paged(_select(document, query.get("labelSelector", "")), query, "List")
            return self._send(200, document)
        handler = getattr(self, f"_{method.lower()}_{kind}", None)
        if handler is None:
            return self._fail(
                404, f"the server could not find the requested resource ({method} {url.path})"
            )
        return handler(parts, query, body)  # type: ignore[no-any-return]

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_PATCH(self) -> None:
        self._route("PATCH")

    def do_DELETE(self) -> None:
        self._route("DELETE")

    def do_PUT(self) -> None:
        self._route("PUT")

    # -- handlers
    def _get_secret(self, parts: list[str], query: dict[str, str], body: Any) -> None:
        key = (parts[3], parts[5])
        if key not in self.state.secrets:
            return self._fail(404, f'secrets "{key[1]}" not found', "NotFound")
        self._send(200, self.state.secrets[key])

    def _put_secret(self, parts: list[str], query: dict[str, str], body: Any) -> None:
        state, key = self.state, (parts[3], parts[5])
        if key not in state.secrets:
            return self._fail(404, f'secrets "{key[1]}" not found', "NotFound")
        if (body.get("metadata") or {}).get("resourceVersion") != state.secrets[key]["metadata"][
            "resourceVersion"
        ]:
            return self._fail(
                409,
                f'Operation cannot be fulfilled on secrets "{key[1]}": the object has been modified; please apply your changes to the latest version and try again',
                "Conflict",
            )
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = state.next_version()
        state.secrets[key] = stored
        self._send(200, stored)

    def _get_webhookconfiguration(self, parts: list[str], query: dict[str, str], body: Any) -> None:
        name = parts[4]
        if name not in self.state.webhook_configurations:
            return self._fail(
                404,
                f'mutatingwebhookconfigurations.admissionregistration.k8s.io "{name}" not found',
                "NotFound",
            )
        self._send(200, self.state.webhook_configurations[name])

    def _patch_webhookconfiguration(
        self, parts: list[str], query: dict[str, str], body: Any
    ) -> None:
        import jsonpatch

        state, name = self.state, parts[4]
        if self.headers.get("Content-Type") != "application/json-patch+json":
            return self._fail(415, "unsupported patch type")
        if name not in state.webhook_configurations:
            return self._fail(
                404,
                f'mutatingwebhookconfigurations.admissionregistration.k8s.io "{name}" not found',
                "NotFound",
            )
        try:
            patched = jsonpatch.apply_patch(state.webhook_configurations[name], body)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as error:
            return self._fail(
                422,
                f"the server rejected our request due to an error in our request: {error}",
                "Invalid",
            )
        patched["metadata"]["resourceVersion"] = state.next_version()
        state.webhook_configurations[name] = patched
        self._send(200, patched)

    def _get_version(self, parts: list[str], query: dict[str, str], body: Any) -> None:
        self._send(200, {"major": "1", "minor": "35", "gitVersion": "v1.35.2-standin"})

    def _post_templates(self, parts: list[str], query: dict[str, str], body: Any) -> None:
        state, namespace = self.state, parts[4]
        name = body.get("metadata", {}).get("name", "")
        problems = _validate_template(body)
        if problems:
            return self._fail(
                422,
                f'ResourceClaimTemplate.resource.k8s.io "{name}" is invalid: {"; ".join(problems)}',
            )
        stored = copy.deepcopy(body)
        if state.drop_capacity:
            for request in stored["spec"]["spec"]["devices"].get("requests", []):
                for exact in [request.get("exactly"), *request.get("firstAvailable", [])]:
                    if exact:
                        exact.pop("capacity", None)
        metadata = stored["metadata"]
        metadata["namespace"] = namespace
        if (namespace, name) in state.templates:
            return self._fail(
                409, f'resourceclaimtemplates.resource.k8s.io "{name}" already exists'
            )
        metadata |= {
            "uid": str(uuid.uuid4()),
            "resourceVersion": state.next_version(),
            "creationTimestamp": state.timestamp(),
        }
        if query.get("dryRun") != "All":
            state.templates[(namespace, name)] = stored
        self._send(201, stored)

    def _patch_template(self, parts: list[str], query: dict[str, str], body: Any) -> None:
        state, key = self.state, (parts[4], parts[6])
        if self.headers.get("Content-Type") != "application/merge-patch+json":
            return self._fail(415, "unsupported patch type")
        if key not in state.templates:
            return self._fail(
                404, f'resourceclaimtemplates.resource.k8s.io "{key[1]}" not found', "NotFound"
            )
        metadata = state.templates[key]["metadata"]
        annotations = (body.get("metadata") or {}).get("annotations") or {}
        metadata["annotations"] = {**metadata.get("annotations", {}), **annotations}
        metadata["resourceVersion"] = state.next_version()
        self._send(200, state.templates[key])

    def _delete_template(self, parts: list[str], query: dict[str, str], body: Any) -> None:
        state, key = self.state, (parts[4], parts[6])
        if key not in state.templates:
            return self._fail(
                404, f'resourceclaimtemplates.resource.k8s.io "{key[1]}" not found', "NotFound"
            )
        wanted = ((body or {}).get("preconditions") or {}).get("resourceVersion")
        actual = state.templates[key]["metadata"]["resourceVersion"]
        if wanted and wanted != actual:
            return self._fail(
                409,
                f"Precondition failed: ResourceVersion in precondition: {wanted}, ResourceVersion in object meta: {actual}",
                "Conflict",
            )
        del state.templates[key]
        self._send(200, status_body(200, "", "") | {"status": "Success"})

    def _get_alltemplates(self, parts: list[str], query: dict[str, str], body: Any) -> None:
        selector = query.get("labelSelector", "")
        wanted = dict(item.split("=", 1) for item in selector.split(",") if item)
        items = [
            t
            for t in self.state.templates.values()
            if all(t["metadata"].get("labels", {}).get(k) == v for k, v in wanted.items())
        ]
        self._paged(items, query, "ResourceClaimTemplateList")

    def _get_pods(self, parts: list[str], query: dict[str, str], body: Any) -> None:
        self._paged(self.state.pods.get(parts[3], []), query, "PodList")

    def _get_resourceslices(self, parts: list[str], query: dict[str, str], body: Any) -> None:
        wanted = dict(
            item.split("=", 1) for item in query.get("fieldSelector", "").split(",") if item
        )
        items = [
            s
            for s in self.state.resource_slices
            if all(s.get("spec", {}).get(k.split(".", 1)[1]) == v for k, v in wanted.items())
        ]
        self._paged(items, query, "ResourceSliceList")

    def _get_deviceclasses(self, parts: list[str], query: dict[str, str], body: Any) -> None:
        self._paged(self.state.device_classes, query, "DeviceClassList")

    def _paged(self, items: list[Any], query: dict[str, str], kind: str) -> None:
        limit = int(query.get("limit") or 0) or len(items) or 1
        start = int(query.get("continue") or 0)
        page = items[start : start + limit]
        metadata: dict[str, Any] = {"resourceVersion": str(self.state._version)}
        if start + limit < len(items):
            metadata["continue"] = str(start + limit)
        self._send(200, {"kind": kind, "apiVersion": "v1", "metadata": metadata, "items": page})


def _select(items: list[Any], selector: str) -> list[Any]:
    wanted = dict(item.split("=", 1) for item in selector.split(",") if item)
    return [
        i
        for i in items
        if all((i.get("metadata") or {}).get("labels", {}).get(k) == v for k, v in wanted.items())
    ]


def _kind(parts: list[str]) -> str:
    path = "/".join(parts)
    if path == "version":
        return "version"
    if path == "apis/resource.k8s.io/v1/resourceclaimtemplates":
        return "alltemplates"
    if path == "apis/resource.k8s.io/v1/deviceclasses":
        return "deviceclasses"
    if path == "apis/resource.k8s.io/v1/resourceslices":
        return "resourceslices"
    if (
        len(parts) == 6
        and path.startswith("apis/resource.k8s.io/v1/namespaces/")
        and parts[5] == "resourceclaimtemplates"
    ):
        return "templates"
    if (
        len(parts) == 7
        and path.startswith("apis/resource.k8s.io/v1/namespaces/")
        and parts[5] == "resourceclaimtemplates"
    ):
        return "template"
    if len(parts) == 6 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "secrets":
        return "secret"
    if len(parts) == 5 and path.startswith(
        "apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/"
    ):
        return "webhookconfiguration"
    if len(parts) == 5 and parts[:2] == ["api", "v1"] and parts[4] == "pods":
        return "pods"
    return "unknown"


def _validate_template(body: Any) -> list[str]:
    problems = []
    if not isinstance(body, dict) or body.get("kind") != "ResourceClaimTemplate":
        return ["kind: must be ResourceClaimTemplate"]
    if not body.get("metadata", {}).get("name"):
        problems.append("metadata.name: Required value")
    requests = ((body.get("spec") or {}).get("spec") or {}).get("devices", {}).get("requests")
    if not requests:
        problems.append("spec.spec.devices.requests: Required value")
    return problems
