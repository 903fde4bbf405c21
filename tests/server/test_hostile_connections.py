"""Issue 11, findings 1-5: what any caller who can reach the port can do with connections,
headers and bodies, played against the real webhook process on loopback. During each attack
an established keep-alive connection (what kube-apiserver holds) keeps being answered, and the
server's RSS stays within 64 MiB of its own baseline and comes back near it afterwards."""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.attack import (
    RETURNED_WITHIN_MIB,
    RSS_GROWTH_MIB,
    Established,
    assert_held,
    ensure_open_files,
    open_connections,
    rss_mib,
    settle,
    warmed_baseline,
)
from tests.support.cluster import wait_for
from tests.support.reviews import replica_pod, review
from tests.support.webhook_process import Webhook

HEAD_TIMEOUT = 2.0


@pytest.fixture
def webhook(tmp_path: Path) -> Iterator[Webhook]:
    # 4,000 raw connections at once here, up to 2,048 accepted by the webhook.
    ensure_open_files(4000 + 2048 + 256, "the connection floods of this module")
    process = Webhook(tmp_path, "--gc-interval", "0", "--head-timeout", str(HEAD_TIMEOUT))
    yield process
    process.stop()


_CONTEXTS: dict[Path, ssl.SSLContext] = {}


def tls_socket(webhook: Webhook, timeout: float = 10) -> ssl.SSLSocket:
    # One client context per CA: making one loads the system's CAs (about 0.1 s).
    context = _CONTEXTS.get(webhook.ca_file)
    if context is None:
        context = _CONTEXTS[webhook.ca_file] = webhook.context()
    sock = socket.create_connection(("127.0.0.1", webhook.port), timeout=timeout)
    tls = context.wrap_socket(sock, server_hostname="localhost", do_handshake_on_connect=False)
    try:
        tls.do_handshake()
    except BaseException:
        tls.close()  # pushed out during its handshake: nothing left open
        raise
    return tls


def closed_by_server(sock: socket.socket, within: float) -> bool:
    """True when the server closes it (EOF or reset) within `within` seconds."""
    sock.settimeout(within)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except (OSError, ssl.SSLError):
        return True
    return True


def status_of(sock: socket.socket) -> int:
    data = b""
    with contextlib.suppress(OSError):
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    return int(data.split(b" ")[1]) if data.startswith(b"HTTP/1.1") else 0


@pytest.mark.timed  # it measures under load, or holds a time bound: alone
def test_idle_and_half_sent_connections_starve_nobody(webhook: Webhook) -> None:
    """Finding 1: ~1,030 idle or half-sent TLS connections made every request 503 for 75 s."""
    baseline = warmed_baseline(webhook)
    held: list[ssl.SSLSocket] = []
    refused = 0
    with Established(webhook) as prober:
        for index in range(1100):
            try:
                sock = tls_socket(webhook, timeout=5)
            except (OSError, ssl.SSLError):
                refused += 1  # pushed out while its handshake ran: the newest win
                continue
            if index % 2:
                sock.sendall(b"POST /mutate HTTP/1.1\r\nHost: loc")  # and never the rest
            held.append(sock)
        # New connections, and the probes on both ports, are answered while they are held.
        assert webhook.get("/healthz")[0] == 200
        assert webhook.get_ops("/healthz")[0] == 200
        time.sleep(0.5)

    assert_held(prober, baseline)
    # None of them outlives the head deadline: the server closes every one.
    started = time.monotonic()
    still_open = [s for s in held if not closed_by_server(s, HEAD_TIMEOUT + 2)]
    assert still_open == [] and time.monotonic() - started < HEAD_TIMEOUT + 4
    for sock in held:
        sock.close()
    metrics = webhook.get_ops("/metrics")[1].decode()
    assert 'hami_dra_http_rejections_total{reason="unproven_pushed_out"}' in metrics
    wait_for(lambda: open_connections(webhook) == 0, "every connection to be accounted closed")
    assert settle(webhook.process.pid, baseline + RETURNED_WITHIN_MIB) <= (
        baseline + RETURNED_WITHIN_MIB
    )


@pytest.mark.timed  # it measures under load, or holds a time bound: alone
def test_a_head_that_never_ends_is_cut(webhook: Webhook) -> None:
    """Findings 2 and 3: 400 MiB of headers (or 150 MiB of request target) were all kept."""
    baseline = warmed_baseline(webhook)
    with Established(webhook) as prober:
        for head, status in (
            (b"GET /healthz HTTP/1.1\r\nX-Endless: ", 431),
            (b"GET /", 431),  # a target that never ends is a head that never ends
            (b"GET /healthz HTTP/1.1\r\n" + b"X-Many: header\r\n" * 4000, 431),
        ):
            sock = tls_socket(webhook)
            sent, started = 0, time.monotonic()
            with contextlib.suppress(OSError):
                sock.sendall(head)
                sent += len(head)
                # What an attacker would send, if it could: the server cuts it off instead.
                while sent < 1024 * 1024 * 1024 and time.monotonic() - started < 10:
                    sock.sendall(b"a" * 16384)
                    sent += 16384
            assert time.monotonic() - started < 3, f"{sent} bytes accepted before the cut"
            assert status_of(sock) in (status, 0)  # 0: the reset overtook the answer
            sock.close()
        # The answer itself, where the client stops sending at the limit.
        sock = tls_socket(webhook)
        sock.sendall(b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert status_of(sock) == 414
        sock.close()
    assert_held(prober, baseline)


@pytest.mark.timed  # it measures under load, or holds a time bound: alone
def test_a_head_that_trickles_is_closed_at_its_deadline(webhook: Webhook) -> None:
    """Finding 1's half-sent connections, and slow heads on a connection already proven."""
    proven = tls_socket(webhook)
    proven.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert status_of(proven) == 200
    fresh = tls_socket(webhook)
    started = time.monotonic()
    for sock in (proven, fresh):
        sock.sendall(b"GET /healthz HTTP/1.1\r\nX-Slow: ")
    ended: list[float] = []

    def trickle(sock: ssl.SSLSocket) -> None:
        with contextlib.suppress(OSError):
            for _ in range(int(HEAD_TIMEOUT * 10)):
                sock.sendall(b"a")
                time.sleep(0.2)
        ended.append(time.monotonic() - started)

    threads = [threading.Thread(target=trickle, args=(s,)) for s in (proven, fresh)]
    for thread in threads:
        thread.start()
    for sock in (proven, fresh):
        assert closed_by_server(sock, HEAD_TIMEOUT + 2)
    assert time.monotonic() - started < HEAD_TIMEOUT + 2
    for thread in threads:
        thread.join()
    for sock in (proven, fresh):
        sock.close()
    assert max(ended) < HEAD_TIMEOUT + 3


def _large_review(size: int) -> bytes:
    pod = replica_pod()
    pod["metadata"]["annotations"] = {"example.com/blob": "x" * size}
    return json.dumps(review(pod)).encode()


@pytest.mark.timed  # it measures under load, or holds a time bound: alone
def test_many_large_bodies_at_once_are_bounded_together(webhook: Webhook) -> None:
    """Finding 4: 40 concurrent 6 MiB bodies took RSS from 74 to 351 MiB, kept afterwards."""
    baseline = warmed_baseline(webhook)
    body = _large_review(6 * 1024 * 1024 - 64 * 1024)
    statuses: list[int] = []

    def send() -> None:
        sock = tls_socket(webhook, timeout=30)
        with contextlib.suppress(OSError):
            sock.sendall(
                b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n" % len(body)
            )
            # Paced (25 MB/s a connection), so that the 2 cores are not saturated by the
            # attacker's own encryption: the bodies are still all in flight at once.
            for start in range(0, len(body), 256 * 1024):
                sock.sendall(body[start : start + 256 * 1024])
                time.sleep(0.01)
        statuses.append(status_of(sock))
        sock.close()

    with Established(webhook) as prober:
        for _ in range(2):  # two rounds: what the first round left must not add up
            threads = [threading.Thread(target=send) for _ in range(40)]
            for thread in threads:
                thread.start()
                time.sleep(0.005)  # 40 handshakes in 0.2 s, not in one event-loop turn
            for thread in threads:
                thread.join(timeout=60)
    # This attack saturates the machine: the bodies that are read are decrypted and parsed
    # (about 20 ms for 6 MiB) on the one event loop while the attacker encrypts on the other
    # core; measured here: p99 80-160 ms (with up to 26 % CPU steal). It is held to being
    # answered, not to the 50 ms of an unsaturated machine.
    assert_held(prober, baseline, p99_ms=400)
    assert set(statuses) <= {200, 503, 0} and statuses.count(200) >= 2, statuses
    assert statuses.count(503) > 0  # the budget did refuse some
    settled = settle(webhook.process.pid, baseline + RETURNED_WITHIN_MIB)
    assert settled <= baseline + RETURNED_WITHIN_MIB, (baseline, settled)


@pytest.mark.timed  # it measures under load, or holds a time bound: alone
def test_connections_that_never_start_tls_are_bounded(webhook: Webhook) -> None:
    """Finding 5: 4,000 TCP connections that never start TLS took 277 MiB (822 MiB after
    repeated rounds), never returned."""
    baseline = warmed_baseline(webhook)
    with Established(webhook) as prober:
        for _ in range(3):
            held = []
            for _ in range(4000):
                sock = socket.socket()
                sock.setblocking(False)
                sock.connect_ex(("127.0.0.1", webhook.port))
                held.append(sock)
            time.sleep(1.0)
            peak = rss_mib(webhook.process.pid)
            assert peak - baseline <= RSS_GROWTH_MIB, (baseline, peak)
            for sock in held:
                sock.close()
    assert_held(prober, baseline)
    wait_for(lambda: open_connections(webhook) == 0, "every connection to be accounted closed")
    settled = settle(webhook.process.pid, baseline + RETURNED_WITHIN_MIB)
    assert settled <= baseline + RETURNED_WITHIN_MIB, (baseline, settled)


@pytest.mark.timed  # it measures under load, or holds a time bound: alone
def test_connections_reset_by_their_peer_are_let_go_at_once(webhook: Webhook) -> None:
    """A caller that resets its connections after an answer (wrk at its end; a client killed
    mid-stream): uvicorn cancelled the keep-alive timer only on a clean close, so each reset
    connection (its TLS objects and buffers, ~90 KiB) stayed referenced by the timer for the
    idle timeout, 120 s; 64 connections at a time grew RSS by ~5.5 MiB a round."""
    baseline = warmed_baseline(webhook)
    body = json.dumps(review(replica_pod())).encode()
    request = (
        b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    statuses = []
    for _ in range(400):
        sock = tls_socket(webhook)
        sock.sendall(request)
        statuses.append(status_of(sock))
        # No TLS goodbye and a linger of 0: the close is a reset.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    assert set(statuses) == {200}, sorted(set(statuses))
    wait_for(lambda: open_connections(webhook) == 0, "every connection to be accounted closed")
    # 400 held connections would be ~35 MiB until the idle timeout; settle() waits 10 s.
    settled = settle(webhook.process.pid, baseline + 8)
    assert settled <= baseline + 8, (baseline, settled)
