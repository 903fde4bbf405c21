"""Running the real webhook (`python -m hami_dra_webhook serve`) in a subprocess, over real TLS."""

from __future__ import annotations

import http.client
import json
import os
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cryptography import x509

from hami_dra_webhook.certs.pki import issue, write
from tests.controlplane.cluster import free_port

__all__ = ["Webhook", "free_port", "served_serial"]


class Webhook:
    def __init__(
        self,
        folder: Path,
        *extra: str,
        env: dict[str, str] | None = None,
        own_certs: bool = True,
        port: int | None = None,
        host: str = "localhost",
    ) -> None:
        """`own_certs`: serve a certificate made here; else the command line must bring one
        (and `ca_file` is to be pointed at its CA); `host` is the name clients connect to."""
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.ca_file, self.cert_file, self.key_file = write(
            issue(["localhost", "127.0.0.1"]), folder / "certs"
        )
        self.port = port or free_port()
        self.ops_port = free_port()  # the plain-HTTP probes and metrics
        self.host = host
        self.log_path = folder / "webhook.log"
        certificate = ["--cert-file", str(self.cert_file), "--key-file", str(self.key_file)]
        command = [
            *(sys.executable, "-m", "hami_dra_webhook", "serve"),
            *("--host", "127.0.0.1", "--port", str(self.port)),
            *("--ops-host", "127.0.0.1", "--ops-port", str(self.ops_port)),
            *(certificate if own_certs else []),
            *extra,
        ]
        self._log = self.log_path.open("wb")
        environment = {
            **os.environ,
            "HAMI_DRA_CERT_RELOAD_INTERVAL": "0.1",
            "HAMI_DRA_GRACEFUL_SHUTDOWN": "5",
            **(env or {}),
        }
        environment.pop("KUBERNETES_SERVICE_HOST", None)
        self.process = subprocess.Popen(
            command, stdout=self._log, stderr=subprocess.STDOUT, env=environment
        )
        try:
            self.wait_ready()
        except BaseException:
            self.stop(signal.SIGKILL)  # never leave a half-started server behind
            raise

    def context(self, ca_files: list[Path] | None = None) -> ssl.SSLContext:
        context = ssl.create_default_context()
        for ca in ca_files or [self.ca_file]:
            context.load_verify_locations(ca)
        return context

    def connection(
        self, context: ssl.SSLContext | None = None, timeout: float = 10
    ) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(
            self.host, self.port, context=context or self.context(), timeout=timeout
        )

    def stopped(self) -> str | None:
        """Why the webhook is no longer running; None while it runs."""
        code = self.process.poll()
        return None if code is None else f"exited {code}"

    def wait_ready(self, timeout: float = 20) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if (why := self.stopped()) is not None:
                raise RuntimeError(f"the webhook {why}: {self.log_tail()}")
            try:  # the operations port: it answers whatever the HTTPS port asks of callers
                status, _ = self.get_ops("/readyz")
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the webhook did not get ready: {self.log_tail()}")

    def get(self, path: str, context: ssl.SSLContext | None = None) -> tuple[int, bytes]:
        connection = self.connection(context, timeout=2)
        try:
            connection.request("GET", path)
            answer = connection.getresponse()
            return answer.status, answer.read()
        finally:
            connection.close()

    def get_ops(self, path: str, method: str = "GET") -> tuple[int, bytes]:
        """A request to the plain-HTTP operations port (probes and metrics)."""
        connection = http.client.HTTPConnection("127.0.0.1", self.ops_port, timeout=2)
        try:
            connection.request(method, path)
            answer = connection.getresponse()
            return answer.status, answer.read()
        finally:
            connection.close()

    def post(
        self,
        body: bytes | dict[str, Any],
        connection: http.client.HTTPSConnection | None = None,
        path: str = "/mutate",
    ) -> tuple[int, Any]:
        own = connection is None
        connection = connection or self.connection()
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        try:
            connection.request(
                "POST", path, body=data, headers={"Content-Type": "application/json"}
            )
            answer = connection.getresponse()
            raw = answer.read()
            content_type = answer.getheader("Content-Type", "")
            return answer.status, json.loads(raw) if content_type.startswith(
                "application/json"
            ) else raw
        finally:
            if own:
                connection.close()

    def log(self) -> str:
        """Everything the process has logged (a search of a tail misses lines that later
        requests' lines pushed out: a SIGHUP line on a slow machine did)."""
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def log_tail(self, chars: int = 4000) -> str:
        """The end of the log, for error messages."""
        return self.log()[-chars:]

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode


def served_serial(webhook: Webhook, context: ssl.SSLContext) -> int:
    """The serial number of the certificate the webhook serves now."""
    connection = webhook.connection(context)
    connection.connect()
    der = connection.sock.getpeercert(binary_form=True)  # type: ignore[union-attr]
    connection.close()
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number
