"""Limits, TLS hardening and API-server faults, through the real webhook process."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hami_dra_webhook.certs.pki import issue, write
from tests.support.apiserver_standin import StandIn
from tests.support.cluster import Cluster, wait_for
from tests.support.reviews import replica_pod, review
from tests.support.webhook_process import Webhook, free_port

BUDGET = 1.0  # --admission-budget of these webhooks
HEAD_TIMEOUT_DEFAULT = 10.0  # --head-timeout's default (server/settings.py)


def _hardened(folder: Path, kubeconfig: Path) -> Webhook:
    return Webhook(
        folder,
        *("--kubeconfig", str(kubeconfig), "--gc-interval", "0", "--admission-budget", str(BUDGET)),
        env={"HAMI_DRA_REQUEST_READ_TIMEOUT": "1", "HAMI_DRA_MAX_BODY_BYTES": str(4 * 1024 * 1024)},
    )


@pytest.fixture
def webhook(kube: Cluster, tmp_path: Path) -> Iterator[Webhook]:
    """On the real kube-apiserver (reviews go to namespace team-a)."""
    kube.empty_namespace("team-a")
    process = _hardened(tmp_path, kube.plane.admin_kubeconfig)
    yield process
    process.stop()


@pytest.fixture
def faulty(standin: StandIn, tmp_path: Path) -> Iterator[Webhook]:
    """On the stand-in: for API faults a real server does not produce on demand."""
    process = _hardened(tmp_path, standin.kubeconfig(tmp_path))
    yield process
    process.stop()


def raw_tls(webhook: Webhook) -> ssl.SSLSocket:
    sock = socket.create_connection(("127.0.0.1", webhook.port), timeout=10)
    return webhook.context().wrap_socket(sock, server_hostname="localhost")


def read_status(sock: ssl.SSLSocket) -> int:
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return int(data.split(b" ")[1]) if data else 0


@pytest.mark.plane
def test_a_body_over_the_limit_gets_413(webhook: Webhook) -> None:
    pod = replica_pod()
    pod["metadata"]["annotations"] = {"blob": "x" * (5 * 1024 * 1024)}
    status, body = webhook.post(review(pod))
    assert status == 413 and "over 4194304 bytes" in body["message"]
    # Without a Content-Length (chunked), the stream is cut at the limit too.
    sock = raw_tls(webhook)
    sock.sendall(
        b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n"
    )
    chunk = b"x" * 65536
    try:
        for _ in range(80):
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
    except OSError:
        pass  # the server may close while we are still sending
    assert read_status(sock) == 413
    sock.close()


@pytest.mark.plane
def test_a_body_that_is_not_json_gets_415(webhook: Webhook) -> None:
    """kube-apiserver sends application/json; anything else is refused before its body is
    read (as kyverno does), and counted."""
    for head in (b"Content-Type: text/plain\r\n", b"", b"Content-Type: application/yaml\r\n"):
        sock = raw_tls(webhook)
        sock.sendall(
            b"POST /mutate HTTP/1.1\r\nHost: localhost\r\n%sContent-Length: 2\r\n\r\n{}" % head
        )
        assert read_status(sock) == 415, head
        sock.close()
    status, _ = webhook.post(review(replica_pod()))  # application/json
    assert status == 200
    charset = raw_tls(webhook)
    body = json.dumps(review(replica_pod())).encode()
    charset.sendall(
        b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: Application/JSON;"
        b" charset=utf-8\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    assert read_status(charset) == 200
    charset.close()


@pytest.mark.plane
@pytest.mark.timed  # it measures under load, or holds a time bound: alone
def test_a_trickling_body_gets_408_and_others_are_served(webhook: Webhook) -> None:
    sock = raw_tls(webhook)
    sock.sendall(
        b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000\r\n\r\n{"
    )
    started = time.monotonic()
    assert webhook.post(review(replica_pod()))[0] == 200  # not blocked by the slow one
    assert read_status(sock) == 408
    assert time.monotonic() - started < 3
    sock.close()


@pytest.mark.plane
def test_slow_loris_connections_do_not_starve_others(webhook: Webhook) -> None:
    sockets = []
    for _ in range(40):
        sock = raw_tls(webhook)
        sock.sendall(b"POST /mutate HTTP/1.1\r\nHost: localh")  # and never the rest
        sockets.append(sock)
    connection = webhook.connection()
    durations = []
    for _ in range(50):
        started = time.monotonic()
        status, _ = webhook.post(review(replica_pod()), connection)
        durations.append(time.monotonic() - started)
        assert status == 200
    connection.close()
    for sock in sockets:
        sock.close()
    # Starved, a request would wait for the half-sent heads' deadline (--head-timeout, 10 s by
    # default); served beside them, each takes milliseconds. The bound is far from both, so a
    # loaded machine does not fail it and a starved server cannot pass it.
    assert max(durations) < HEAD_TIMEOUT_DEFAULT / 4, durations


def test_concurrency_is_bounded(tmp_path: Path) -> None:
    """Requests being answered count, not connections: idle ones never take a slot."""
    process = Webhook(tmp_path, "--gc-interval", "0", env={"HAMI_DRA_MAX_CONCURRENCY": "3"})
    try:
        idle = [process.connection() for _ in range(10)]
        for connection in idle:
            connection.connect()
        assert process.post(review(replica_pod()))[0] == 200  # ten idle ones hold no slot
        # Three requests whose bodies have not all come yet are being answered.
        held = [raw_tls(process) for _ in range(3)]
        for sock in held:
            sock.sendall(
                b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                b"Content-Length: 100\r\n\r\n{"
            )
        # Busy once the server has read the three heads (no fixed sleep: waited for).
        wait_for(lambda: process.post(review(replica_pod()))[0] == 503, "503 while three are held")
        for sock in held:
            sock.close()
        for connection in idle:
            connection.close()
        # Served again once the server has noticed the closed connections.
        wait_for(lambda: process.post(review(replica_pod()))[0] == 200, "a free slot", timeout=5)
    finally:
        process.stop()


@pytest.mark.plane
def test_deeply_nested_bodies_are_malformed_not_crashes(webhook: Webhook) -> None:
    status, body = webhook.post(b'{"a":' * 100000 + b"1" + b"}" * 100000)
    assert status == 400 and "nested too deeply" in body["message"]
    document = review(replica_pod())
    document["request"]["object"]["metadata"]["annotations"] = {"x": "y"}
    deep: dict[str, object] = {}
    node = deep
    for _ in range(500):
        node["n"] = {}
        node = node["n"]  # type: ignore[assignment]
    document["request"]["object"]["spec"]["extra"] = deep
    status, body = webhook.post(document)
    assert status == 200 and body["response"]["allowed"] is True


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1:DeprecationWarning")
def test_tls_1_1_and_weak_ciphers_are_refused(tmp_path: Path) -> None:
    process = Webhook(tmp_path, "--tls-min-version", "1.2")
    try:
        for maximum in (ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1):
            client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            client.load_verify_locations(process.ca_file)
            client.set_ciphers("DEFAULT:@SECLEVEL=0")
            client.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
            client.maximum_version = maximum
            with pytest.raises(ssl.SSLError):
                process.post(review(replica_pod()), process.connection(client))
    finally:
        process.stop()


def _rsa_certificate(folder: Path) -> tuple[Path, Path, Path]:
    """An RSA serving certificate: with an ECDSA one, RSA key exchange could never be agreed on
    whatever the server allowed, and refusing it would prove nothing."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    cert, key_file = folder / "rsa.crt", folder / "rsa.key"
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_file.chmod(0o600)
    return cert, key_file, cert  # self-signed: the certificate is its own CA


def _weak_client(ca: Path) -> ssl.SSLContext:
    weak = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    weak.load_verify_locations(ca)
    weak.maximum_version = ssl.TLSVersion.TLSv1_2
    weak.set_ciphers("AES128-SHA:AES256-SHA:AES128-GCM-SHA256:@SECLEVEL=0")  # RSA key exchange
    return weak


def test_non_forward_secret_ciphers_are_refused(tmp_path: Path) -> None:
    cert, key, ca = _rsa_certificate(tmp_path / "rsa")
    # The control: a permissive TLS server with the same certificate agrees to these ciphers.
    permissive = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    permissive.load_cert_chain(cert, key)
    permissive.set_ciphers("ALL:@SECLEVEL=0")
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def accept() -> None:
            raw, _ = listener.accept()
            with (
                contextlib.suppress(ssl.SSLError, OSError),
                permissive.wrap_socket(raw, server_side=True),
            ):
                pass

        server = threading.Thread(target=accept)
        server.start()
        with (
            socket.create_connection(("127.0.0.1", port)) as raw,
            _weak_client(ca).wrap_socket(raw, server_hostname="localhost") as tls,
        ):
            agreed = tls.cipher()[0]
        server.join()
    assert not agreed.startswith("ECDHE"), agreed
    process = Webhook(
        tmp_path, "--tls-min-version", "1.2", "--cert-file", str(cert), "--key-file", str(key),
        own_certs=False,
    )  # fmt: skip
    try:
        with pytest.raises(ssl.SSLError):
            process.post(review(replica_pod()), process.connection(_weak_client(ca)))
    finally:
        process.stop()


def test_an_exposed_key_file_stops_the_start(tmp_path: Path) -> None:
    _, cert, key = write(issue(["localhost"]), tmp_path)
    os.chmod(key, 0o644)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "hami_dra_webhook",
            "serve",
            "--port",
            str(free_port()),
            "--cert-file",
            str(cert),
            "--key-file",
            str(key),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert (
        result.returncode == 3 and "other users can read or change the private key" in result.stderr
    )


FAULTS = {
    "forbidden": ({"fail": 403}, 500, "RBAC"),
    "too-many-requests": ({"fail": 429}, 503, "429"),
    "internal-error": ({"fail": 500}, 503, "500"),
    "slower-than-budget": ({"delay": 3.0}, 504, ""),
    "reset": ({"reset": True}, 503, "did not answer"),
    "truncated": ({"truncate": True}, 503, "did not answer"),
}


@pytest.mark.timed  # it measures under load, or holds a time bound: alone
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_api_faults_end_within_budget_and_leave_nothing_broken(
    faulty: Webhook, standin: StandIn, fault: str
) -> None:
    webhook = faulty
    setting, code, fragment = FAULTS[fault]
    key = ("POST", "templates")
    if "fail" in setting:
        standin.fail[key] = setting["fail"]  # type: ignore[assignment]
    if "delay" in setting:
        standin.delay[key] = setting["delay"]  # type: ignore[assignment]
    if "reset" in setting:
        standin.reset.add(key)
    if "truncate" in setting:
        standin.truncate.add(key)
    started = time.monotonic()
    status, body = webhook.post(review(replica_pod()))
    elapsed = time.monotonic() - started
    answer = body["response"]
    # The admission budget is 1 s and the stand-in's slowest answer 3 s: an answer well before
    # that shows the budget cut the call (the margin is the machine's noise, not the webhook's).
    assert status == 200 and elapsed < BUDGET + 1.0, elapsed
    assert answer["allowed"] is False and answer["status"]["code"] in (code, 503, 504)
    assert fragment in answer["status"]["message"]
    standin.fail.clear()
    standin.delay.clear()
    standin.reset.clear()
    standin.truncate.clear()

    def retried() -> dict[str, Any] | None:  # once the stalled call has let go
        answer: dict[str, Any] = webhook.post(review(replica_pod()))[1]["response"]
        return answer if answer["allowed"] else None

    retry = wait_for(retried, "a retry to be admitted", timeout=10)
    name = retry["auditAnnotations"]["templates"]
    assert ("team-a", name) in standin.templates
    metrics = webhook.get("/metrics")[1].decode()
    assert "hami_dra_api_errors_total" in metrics and 'outcome="refused"' in metrics


@pytest.mark.timed  # it measures under load, or holds a time bound: alone
def test_api_unreachable_refuses_quickly(faulty: Webhook, standin: StandIn) -> None:
    webhook = faulty
    standin.stop()
    started = time.monotonic()
    answer = webhook.post(review(replica_pod()))[1]["response"]
    assert time.monotonic() - started < 1.6
    assert answer["allowed"] is False and answer["status"]["code"] == 503
    assert 'hami_dra_api_errors_total{code="0"}' in webhook.get("/metrics")[1].decode()


@pytest.mark.plane
def test_two_servers_racing_on_the_same_templates(kube: Cluster, tmp_path: Path) -> None:
    """Two webhook processes share the real kube-apiserver; concurrent admissions of identical
    pods on both create each template exactly once (or meet a 409) and never fail."""
    kube.empty_namespace("team-a")
    kubeconfig = str(kube.plane.admin_kubeconfig)
    servers: list[Webhook] = []
    failures: list[str] = []

    def client(server: Webhook, memory: int) -> None:
        connection = server.connection()
        for _ in range(20):
            status, body = server.post(
                review(replica_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(memory)})),
                connection,
            )
            if status != 200 or body["response"]["allowed"] is not True:
                failures.append(json.dumps(body)[:300])
        connection.close()

    try:
        for i in range(2):  # inside the try: a second server that fails stops the first
            servers.append(
                Webhook(tmp_path / f"s{i}", "--kubeconfig", kubeconfig, "--gc-interval", "0")
            )
        threads = [
            threading.Thread(target=client, args=(servers[i % 2], 1000 + (i % 3)))
            for i in range(12)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for server in servers:
            server.stop()
    assert failures == []
    assert len(kube.get("resourceclaimtemplates", "-n", "team-a")["items"]) == 3
