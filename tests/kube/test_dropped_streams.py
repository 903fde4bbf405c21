"""A watch the caller stops is dropped, not closed gracefully: the command's event loop may end
at once (asyncio.run), and a TLS close that waits for the server's close_notify then leaves its
socket open until the garbage collector finds it (a ResourceWarning in whatever test runs then:
seen once in CI, 2026-12-07). The server here is a STAND-IN for kube-apiserver, because the real
one answers close_notify at once and the fault needs a slow peer: a TLS server on 127.0.0.1 that
answers a watch with one event and then never reads nor closes."""

from __future__ import annotations

import asyncio
import gc
import socket
import ssl
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from hami_dra_webhook.certs.pki import issue, write
from hami_dra_webhook.kube.client import Configuration, KubernetesApi

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
EVENT = b'{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"2"}}}\n'


@pytest.fixture
def silent_server(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    ca, cert, key = write(issue(["127.0.0.1"]), tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[ssl.SSLSocket] = []
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                raw, _ = listener.accept()
            except TimeoutError:
                continue
            connection = context.wrap_socket(raw, server_side=True)
            connection.recv(65536)  # the request
            connection.sendall(HEAD + b"%x\r\n" % len(EVENT) + EVENT + b"\r\n")
            held.append(connection)  # never read again, never closed: no close_notify

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], ca
    finally:
        stop.set()
        thread.join()
        for connection in held:
            connection.close()
        listener.close()


def test_a_stopped_watch_leaves_no_socket_when_the_loop_ends_at_once(
    silent_server: tuple[int, Path],
) -> None:
    port, ca = silent_server
    configuration = Configuration(host=f"https://127.0.0.1:{port}")
    configuration.ssl_ca_cert = str(ca)

    async def watch_once() -> str:
        api = KubernetesApi(configuration)
        try:
            events = api.watch_path("/api/v1/pods", [], "1", window=60)
            seen = [str((await anext(events))["type"]), str((await anext(events))["type"])]
            await events.aclose()  # type: ignore[attr-defined]
            return ",".join(seen)
        finally:
            await api.close()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        assert asyncio.run(watch_once()) == "WATCHING,ADDED"
        gc.collect()
    leaks = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaks == []
