"""A connection to kube-apiserver that fails is said in plain words (issue 49: the commands
printed `ClientConnectorError: Cannot connect to host ...`). Real connections on 127.0.0.1: a
closed port, and a listener that does not speak TLS."""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
from collections.abc import Iterator

import aiohttp
import pytest

from hami_dra_webhook.kube.no_answer import no_answer
from tests.controlplane.cluster import free_port


async def failure(url: str) -> BaseException:
    context = ssl.create_default_context()
    async with aiohttp.ClientSession() as session:
        try:
            async with session.get(url, ssl=context, timeout=aiohttp.ClientTimeout(total=5)):
                pass
        except Exception as error:  # what the API client would have raised
            return error
    raise AssertionError("it answered")


@pytest.fixture
def not_tls() -> Iterator[int]:
    """A listener that answers plain text to a TLS client hello, for a bounded few seconds."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(5)

    def answer() -> None:
        try:
            connection, _ = server.accept()
        except TimeoutError:
            return
        with connection:
            connection.sendall(b"HTTP/1.1 200 OK\r\n\r\nhello")

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    thread.join(timeout=10)
    server.close()


def test_a_closed_port_is_nothing_answering_there() -> None:
    port = free_port()
    error = no_answer(asyncio.run(failure(f"https://127.0.0.1:{port}/version")))
    assert error.status == 0
    assert error.message == f"nothing answers at https://127.0.0.1:{port} (connection refused)"


def test_a_server_without_tls_is_a_failed_handshake(not_tls: int) -> None:
    error = no_answer(asyncio.run(failure(f"https://127.0.0.1:{not_tls}/version")))
    assert error.message.startswith(f"https://127.0.0.1:{not_tls}: the TLS handshake failed (")
    assert "Cannot connect" not in error.message and "ssl:default" not in error.message


def test_anything_else_keeps_its_own_words() -> None:
    assert no_answer(aiohttp.ServerDisconnectedError()).message == (
        "the server closed the connection before it answered"
    )
    assert no_answer(ValueError("odd")).message == "odd"
