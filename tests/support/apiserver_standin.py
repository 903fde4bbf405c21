"""A stand-in for kube-apiserver, kept ONLY for faults a real server does not produce on demand.

Everything the real kube-apiserver can answer is tested against it (tests/controlplane: the
`kube` fixture and the end-to-end suite). This stand-in exists for what a real server cannot be
made to do at a chosen moment: answer 500 or 429, reset a connection mid-request, send half a
body and close, stall for seconds, or stop answering at all. It serves only the calls the
webhook process makes (version, the capacity probe, DeviceClasses, ResourceSlices, template
create and stamp) in the API's wire format (`Status` bodies, 201/409/404). Faults are set per
test: `fail[(method, kind)] = status`, `delay[...] = seconds`, `reset`, `truncate`, `trickle`
(one byte of the answer every 0.1 s), `stop()`.
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

import jsonpatch
import jsonpointer

REASONS = {404: "NotFound", 409: "AlreadyExists", 429: "TooManyRequests", 500: "InternalError"}


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
    """Templates it stored, the faults to inject, and `url` after `start()`."""

    def __init__(self) -> None:
        self.templates: dict[tuple[str, str], dict[str, Any]] = {}
        self.fail: dict[tuple[str, str], int] = {}
        self.delay: dict[tuple[str, str], float] = {}
        self.reset: set[tuple[str, str]] = set()
        self.truncate: set[tuple[str, str]] = set()  # headers and half a body, then a close
        self.trickle: set[tuple[str, str]] = set()  # an answer sent one byte at a time
        self.received: Counter[tuple[str, str]] = Counter()  # requests seen, faults included
        self.token = "standin-token"
        self._version = 1000
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.connections: set[Any] = set()

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

    def next_version(self) -> str:
        with self._lock:
            self._version += 1
            return str(self._version)


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
        with contextlib.suppress(OSError):  # the client may have given up (a stall test)
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

    def _fail(self, code: int, message: str) -> None:
        headers = {"Retry-After": "1"} if code == 429 else None
        self._send(code, status_body(code, REASONS.get(code, "Unknown"), message), headers)

    def _route(self, method: str) -> None:
        state = self.state
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        parts = url.path.strip("/").split("/")
        kind = _kind(parts)
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        state.received[(method, kind)] += 1
        if self.headers.get("Authorization") != f"Bearer {state.token}":
            return self._fail(401, "Unauthorized")
        if (method, kind) in state.delay:
            time.sleep(state.delay[(method, kind)])
        if (method, kind) in state.reset:
            self.connection.shutdown(2)  # a connection reset mid-request
            self.close_connection = True
            return None
        if (method, kind) in state.trickle:
            answer = json.dumps(status_body(409, "AlreadyExists", "trickled")).encode()
            head = b"HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\n"
            data = head + b"Content-Length: %d\r\n\r\n" % len(answer) + answer
            with contextlib.suppress(OSError):  # the client gives up long before the end
                for index in range(len(data)):
                    self.wfile.write(data[index : index + 1])
                    self.wfile.flush()
                    time.sleep(0.1)
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
        if (method, kind) == ("GET", "version"):
            return self._send(200, {"major": "1", "minor": "36", "gitVersion": "v1.36.3-standin"})
        if (method, kind) in (("GET", "deviceclasses"), ("GET", "resourceslices")):
            return self._send(
                200, {"kind": "List", "apiVersion": "v1", "metadata": {}, "items": []}
            )
        if (method, kind) == ("POST", "templates"):
            return self._create(parts[4], body, dry_run=query.get("dryRun") == "All")
        if (method, kind) == ("PATCH", "template"):
            return self._stamp((parts[4], parts[6]), body)
        if (method, kind) == ("GET", "template"):
            return self._get((parts[4], parts[6]))
        return self._fail(404, f"the stand-in does not serve {method} {url.path}")

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_PATCH(self) -> None:
        self._route("PATCH")

    def _create(self, namespace: str, body: Any, *, dry_run: bool) -> None:
        state = self.state
        stored = copy.deepcopy(body)
        metadata = stored["metadata"]
        if "name" not in metadata:  # generateName, as kube-apiserver fills it
            metadata["name"] = metadata["generateName"] + uuid.uuid4().hex[:5]
        name = metadata["name"]
        if (namespace, name) in state.templates:
            return self._fail(
                409, f'resourceclaimtemplates.resource.k8s.io "{name}" already exists'
            )
        metadata |= {
            "namespace": namespace,
            "uid": str(uuid.uuid4()),
            "resourceVersion": state.next_version(),
            "creationTimestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        if not dry_run:
            state.templates[(namespace, name)] = stored
        return self._send(201, stored)

    def _stamp(self, key: tuple[str, str], body: Any) -> None:
        """An RFC 6902 JSON patch, as kube-apiserver applies one: a `test` that does not hold
        is a 422 and nothing is written."""
        state = self.state
        if key not in state.templates:
            return self._fail(404, f'resourceclaimtemplates.resource.k8s.io "{key[1]}" not found')
        try:
            patched = jsonpatch.apply_patch(state.templates[key], body)
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as error:
            return self._fail(422, f"the server rejected our request: {error}")
        patched["metadata"]["resourceVersion"] = state.next_version()
        state.templates[key] = patched
        return self._send(200, patched)

    def _get(self, key: tuple[str, str]) -> None:
        if key not in self.state.templates:
            return self._fail(404, f'resourceclaimtemplates.resource.k8s.io "{key[1]}" not found')
        return self._send(200, self.state.templates[key])


def _kind(parts: list[str]) -> str:
    path = "/".join(parts)
    if path == "version":
        return "version"
    if path == "apis/resource.k8s.io/v1/deviceclasses":
        return "deviceclasses"
    if path == "apis/resource.k8s.io/v1/resourceslices":
        return "resourceslices"
    if path.startswith("apis/resource.k8s.io/v1/namespaces/") and parts[5:6] == [
        "resourceclaimtemplates"
    ]:
        return "templates" if len(parts) == 6 else "template"
    return "unknown"
