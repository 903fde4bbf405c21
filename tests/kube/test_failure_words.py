"""Issue 65, item 2: a failed call says what it is, the call (method and URL), and the likely fix.
A server that is no Kubernetes API server (it answers 404 to every path, in plain text: a wrong
URL in the kubeconfig, a proxy) is a STAND-IN by nature: no real kube-apiserver answers so. A
refused connection is a port nothing listens on."""

from __future__ import annotations

import io
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from hami_dra_webhook.cli.main import main


class _NotKubernetes(BaseHTTPRequestHandler):
    """404 `page not found` in plain text to every path, as a web server that is not an API
    server answers."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        body = b"404 page not found\n"
        self.send_response(404)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET  # noqa: N815


@pytest.fixture
def not_kubernetes() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotKubernetes)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _kubeconfig(folder: Path, server: str) -> str:
    path = folder / "kubeconfig"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    return str(path)


def _run(*args: str) -> tuple[int, str]:
    err = io.StringIO()
    code = main(list(args), stdin=io.StringIO(""), stdout=io.StringIO(), stderr=err)
    return code, err.getvalue()


@pytest.mark.parametrize(
    "command",
    [("scan", "--cluster", "-A"), ("migrate", "status"), ("gc", "--dry-run")],
    ids=" ".join,
)
def test_a_server_that_is_no_api_server_is_named_with_its_url(
    command: tuple[str, ...], not_kubernetes: str, tmp_path: Path
) -> None:
    code, err = _run(*command, "--kubeconfig", _kubeconfig(tmp_path, not_kubernetes))
    assert code == 3, err
    assert f"GET {not_kubernetes}/" in err, err
    assert "likely no Kubernetes API server" in err and "kubectl config view --minify" in err
    assert "no message" not in err and "Traceback" not in err


def test_a_refused_connection_names_the_url(tmp_path: Path) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    code, err = _run(
        "scan", "--cluster", "-A", "--kubeconfig", _kubeconfig(tmp_path, f"http://127.0.0.1:{port}")
    )
    assert code == 3, err
    assert "the cluster did not answer: " in err, err
    assert f"(GET http://127.0.0.1:{port}/" in err, err
    assert "kubectl cluster-info" in err
