"""The whole server built and run without the command line (server/builder.py): what `serve`
runs, from Settings and a Policy, answering over real TLS on real sockets."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import ssl
import time
from pathlib import Path

import pytest

from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from hami_dra_webhook.server.builder import StartupError, WebhookProcess, build_server
from hami_dra_webhook.server.operations import readiness
from hami_dra_webhook.server.settings import Settings
from tests.support.loop import run
from tests.support.reviews import replica_pod, review
from tests.support.webhook_process import free_port


def _post(port: int, ca: Path, body: bytes) -> tuple[int, dict[str, object]]:
    context = ssl.create_default_context(cafile=str(ca))
    connection = http.client.HTTPSConnection("localhost", port, context=context, timeout=10)
    try:
        connection.request("POST", "/mutate", body, {"Content-Type": "application/json"})
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read())
    finally:
        connection.close()


def _local_settings(folder: Path) -> Settings:
    """Both ports on loopback, a self-signed certificate in `folder`, no garbage collection."""
    return Settings(
        host="127.0.0.1",
        port=free_port(),
        ops_host="127.0.0.1",
        ops_port=free_port(),
        self_signed_dir=folder,
        gc_interval=0,
    )


async def _started(server: WebhookProcess) -> asyncio.Task[bool]:
    """`server` running, once its HTTPS server has started (within 30 s)."""
    running = asyncio.create_task(server.run())
    deadline = asyncio.get_running_loop().time() + 30
    while not server.server.started:
        assert not running.done() and asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.02)
    return running


def test_the_built_server_answers_and_stops(tmp_path: Path) -> None:
    settings = _local_settings(tmp_path)

    async def scenario() -> tuple[int, dict[str, object], bool]:
        server = await build_server(settings, DEFAULT_POLICY, cleanup=[])
        running = await _started(server)
        body = json.dumps(review(replica_pod())).encode()
        status, answer = await asyncio.to_thread(_post, settings.port, tmp_path / "ca.crt", body)
        server.server.should_exit = True
        started = await asyncio.wait_for(running, timeout=30)
        return status, answer, started

    status, answer, started = run(scenario())
    response = answer["response"]
    assert status == 200 and started
    assert isinstance(response, dict) and response["allowed"] is True and "patch" in response


def test_not_ready_until_the_webhook_port_listens(tmp_path: Path) -> None:
    """The operations port is bound first and can answer /readyz before the HTTPS port
    listens: a loaded machine showed a client told "ready" and then refused. Not ready until
    the HTTPS server has started."""
    settings = _local_settings(tmp_path)

    async def scenario() -> tuple[dict[str, object], dict[str, object]]:
        server = await build_server(settings, DEFAULT_POLICY, cleanup=[])
        before = readiness(server.services, time.time())
        running = await _started(server)
        after = readiness(server.services, time.time())
        server.server.should_exit = True
        await asyncio.wait_for(running, timeout=30)
        return before, after

    before, after = run(scenario())
    assert before["ready"] is False and before["webhookPort"] == "not listening yet", before
    assert after["ready"] is True and "webhookPort" not in after, after


def test_an_operations_port_in_use_is_a_start_up_error(tmp_path: Path) -> None:
    import socket

    with socket.create_server(("127.0.0.1", 0)) as taken:
        settings = Settings(
            host="127.0.0.1",
            port=free_port(),
            ops_host="127.0.0.1",
            ops_port=taken.getsockname()[1],
            self_signed_dir=tmp_path,
        )
        with pytest.raises(StartupError, match="choose another port"):
            run(build_server(settings, DEFAULT_POLICY, cleanup=[]))


def test_a_large_request_sent_with_the_handshake_is_answered_on_asyncios_loop(
    tmp_path: Path,
) -> None:
    """asyncio's own loop (the server's when uvloop is not installed; these tests run on it)
    hands the protocol the first decrypted bytes as the handshake completes, before start_tls
    returns. A TLS 1.3 client sends its request right after its Finished, so a request over the
    32 KiB head limit arrived there whole, and the connection was aborted: those bytes are a
    body, not a head. Each of 20 fresh connections sends ~200 KiB at once after the handshake."""
    settings = _local_settings(tmp_path)
    pod = replica_pod()
    pod["metadata"]["annotations"] = {"filler": "x" * 200_000}
    body = json.dumps(review(pod)).encode()
    request = (
        b"POST /mutate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(body), body)
    )

    def exchange() -> bytes:
        context = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
        raw = socket.create_connection(("127.0.0.1", settings.port), timeout=10)
        with context.wrap_socket(raw, server_hostname="localhost") as connection:
            connection.sendall(request)
            return connection.recv(12)

    async def scenario() -> list[bytes]:
        server = await build_server(settings, DEFAULT_POLICY, cleanup=[])
        running = await _started(server)
        try:
            return [await asyncio.to_thread(exchange) for _ in range(20)]
        finally:
            server.server.should_exit = True
            await asyncio.wait_for(running, timeout=30)

    answers = run(scenario())
    assert answers == [b"HTTP/1.1 200"] * 20, answers
