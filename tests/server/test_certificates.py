"""Certificates: the `certs` command, and rotation under concurrent requests with zero failures."""

from __future__ import annotations

import base64
import contextlib
import io
import os
import ssl
import threading
from pathlib import Path

from cryptography import x509

from hami_dra_webhook.certs.pki import issue, write
from hami_dra_webhook.cli.main import main
from tests.support.cluster import wait_for
from tests.support.reviews import replica_pod, review
from tests.support.webhook_process import Webhook, served_serial


def test_certs_command_writes_files_sans_and_ca_bundle(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = main(
        [
            "certs",
            "--service",
            "hami-dra-webhook",
            "--namespace",
            "hami-system",
            "--out-dir",
            str(tmp_path),
            "--days",
            "30",
        ],
        stdout=out,
        stderr=err,
    )
    assert code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]
    assert (tmp_path / "tls.key").stat().st_mode & 0o777 == 0o600
    assert base64.b64decode(out.getvalue().strip()) == (tmp_path / "ca.crt").read_bytes()
    cert = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
    names = cert.extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    ).value.get_values_for_type(x509.DNSName)
    assert names == [
        "hami-dra-webhook",
        "hami-dra-webhook.hami-system",
        "hami-dra-webhook.hami-system.svc",
        "hami-dra-webhook.hami-system.svc.cluster.local",
    ]
    days = (cert.not_valid_after_utc - cert.not_valid_before_utc).days
    assert 29 <= days <= 30
    # The serving certificate verifies against the CA for the Service's name.
    context = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    assert _handshake(context, server, "hami-dra-webhook.hami-system.svc")


def _handshake(client: ssl.SSLContext, server: ssl.SSLContext, name: str) -> bool:
    client_in, client_out, server_in, server_out = (
        ssl.MemoryBIO(),
        ssl.MemoryBIO(),
        ssl.MemoryBIO(),
        ssl.MemoryBIO(),
    )
    c = client.wrap_bio(client_in, client_out, server_hostname=name)
    s = server.wrap_bio(server_in, server_out, server_side=True)
    for _ in range(10):
        for side in (c, s):
            with contextlib.suppress(ssl.SSLWantReadError):
                side.do_handshake()
        server_in.write(client_out.read())
        client_in.write(server_out.read())
    return c.version() is not None and s.version() is not None


def test_certs_command_refuses_bad_days(tmp_path: Path) -> None:
    err = io.StringIO()
    assert (
        main(
            [
                "certs",
                "--service",
                "s",
                "--namespace",
                "n",
                "--out-dir",
                str(tmp_path),
                "--days",
                "0",
            ],
            stdout=io.StringIO(),
            stderr=err,
        )
        == 64
    )
    assert "--days" in err.getvalue()


def test_rotation_in_place_under_concurrent_requests(tmp_path: Path) -> None:
    """Rewrite tls.crt then tls.key in place (as a Secret update does) while eight clients keep
    opening new TLS connections: no request fails, and the new certificate is then served."""
    webhook = Webhook(tmp_path)
    rotated = issue(["localhost", "127.0.0.1"])
    new_ca = tmp_path / "new-ca.crt"
    new_ca.write_bytes(rotated.ca_pem)
    both = webhook.context([webhook.ca_file, new_ca])
    failures: list[str] = []
    answered = [0]
    stop = threading.Event()

    def client() -> None:
        while not stop.is_set():
            connection = webhook.connection(both, timeout=5)  # a new handshake each time
            try:
                status, body = webhook.post(review(replica_pod()), connection)
                if status != 200 or body["response"]["allowed"] is not True:
                    failures.append(f"{status} {body}")
                answered[0] += 1
            except Exception as error:
                failures.append(repr(error))
            finally:
                connection.close()

    threads = [threading.Thread(target=client) for _ in range(8)]
    try:
        for thread in threads:
            thread.start()
        wait_for(lambda: answered[0] >= 8, "clients to be answered")
        before = answered[0]
        webhook.cert_file.write_bytes(rotated.cert_pem)
        # The key still belongs to the old certificate: the pair does not load, the old one serves.
        wait_for(lambda: answered[0] >= before + 16, "answers with half a pair on disk")
        fd = os.open(webhook.key_file, os.O_WRONLY | os.O_TRUNC)
        os.write(fd, rotated.key_pem)
        os.close(fd)
        rotated_serial = x509.load_pem_x509_certificate(rotated.cert_pem).serial_number
        wait_for(
            lambda: served_serial(webhook, both) == rotated_serial,
            "the rotated certificate to be served",
            timeout=10,
        )
        after = answered[0]
        wait_for(lambda: answered[0] >= after + 16, "answers with the rotated certificate")
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    served = served_serial(webhook, both)
    webhook.stop()
    assert failures == []
    assert answered[0] > before > 0
    assert served == x509.load_pem_x509_certificate(rotated.cert_pem).serial_number


def test_reloader_keeps_the_old_pair_until_the_new_one_loads(tmp_path: Path) -> None:
    from hami_dra_webhook.server.tls import ReloadingTLS

    _, cert, key = write(issue(["localhost"]), tmp_path)
    tls = ReloadingTLS(cert, key)
    first = issue(["localhost"])
    cert.write_bytes(first.cert_pem)
    assert tls.reload_if_changed() is False and tls.reloads == 0  # mismatched pair
    key.write_bytes(first.key_pem)
    assert tls.reload_if_changed() is True and tls.reloads == 1
    assert tls.reload_if_changed() is False
