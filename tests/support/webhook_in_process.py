"""The whole webhook (server/builder.py, what `serve` runs) in this test process: its HTTPS and
operations servers on real sockets over real TLS, in a thread with an event loop of its own.

For behaviour tests that need the server's answers on the wire but nothing of a process: uvicorn
tests its own server the same way. What only a process has (signals, exit codes, its memory, the
command line's output, a second replica) stays with tests/support/webhook_process.py, whose
interface this one keeps (`post`, `get`, `get_ops`, `connection`, `log`, `stop`)."""

from __future__ import annotations

import asyncio
import io
import logging
import threading
from pathlib import Path

from hami_dra_webhook.certs.pki import issue, write
from hami_dra_webhook.cli.main import build_parser
from hami_dra_webhook.files.policy_file import read_policy
from hami_dra_webhook.server.builder import WebhookProcess, build_server
from hami_dra_webhook.server.logs import TextFormatter
from hami_dra_webhook.server.settings import Settings
from tests.support.webhook_process import Webhook, free_port

START_TIMEOUT = 30.0


class InProcessWebhook(Webhook):
    """`Webhook`'s interface, served from a thread of this process. `flags` are `serve`'s, read
    by its own parser; the defaults `Webhook` sets through the environment (a certificate
    reloaded every 0.1 s, a 5 s graceful shutdown) are set as settings here."""

    def __init__(self, folder: Path, *flags: str) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.ca_file, self.cert_file, self.key_file = write(
            issue(["localhost", "127.0.0.1"]), folder / "certs"
        )
        self.port, self.ops_port, self.host = free_port(), free_port(), "localhost"
        arguments = build_parser().parse_args(
            [
                "serve",
                *("--host", "127.0.0.1", "--port", str(self.port)),
                *("--ops-host", "127.0.0.1", "--ops-port", str(self.ops_port)),
                *("--cert-file", str(self.cert_file), "--key-file", str(self.key_file)),
                *flags,
            ]
        )
        given = {
            name: value
            for name in Settings.model_fields
            if (value := getattr(arguments, name, None)) is not None
        }
        given.setdefault("cert_reload_interval", 0.1)
        given.setdefault("graceful_shutdown", 5)
        self.settings = Settings(**given)
        self.policy = read_policy(str(self.settings.config) if self.settings.config else None)
        self._lines = io.StringIO()
        self._handler = logging.StreamHandler(self._lines)
        self._handler.setFormatter(TextFormatter())
        self._handler.setLevel(self.settings.log_level.upper())
        logging.getLogger().addHandler(self._handler)
        self._server: WebhookProcess | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="webhook", daemon=True)
        self._thread.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise

    def _serve(self) -> None:
        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            self._server = await build_server(self.settings, self.policy.policy, cleanup=[])
            await self._server.run()

        try:
            asyncio.run(serve())
        except BaseException as error:  # reported by wait_ready and stop
            self._failure = error

    def stopped(self) -> str | None:
        if self._thread.is_alive():
            return None
        return f"stopped: {self._failure!r}"

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        super().wait_ready(timeout)

    def log(self) -> str:
        return self._lines.getvalue()

    def stop(self, sig: int = 0) -> int:
        """Stop it as uvicorn stops on SIGTERM (the signal itself is a process's: not sent);
        0 once stopped cleanly."""
        server, loop = self._server, self._loop
        if server is not None and loop is not None and self._thread.is_alive():
            loop.call_soon_threadsafe(setattr, server.server, "should_exit", True)
        self._thread.join(timeout=30)
        logging.getLogger().removeHandler(self._handler)
        if self._thread.is_alive() or self._failure is not None:
            return 1
        return 0
