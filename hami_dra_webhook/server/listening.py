"""The two listening servers (HTTPS webhook, plain-HTTP operations) and how they stop.

Both run uvicorn's server loop with `GuardedHttpProtocol`, each port with a guard of its own, so
that a flood on one port cannot close the other's connections.

Stopping: the first SIGTERM (or SIGINT) starts a drain of `drain_delay` seconds, during which
everything is still answered and `/readyz` says "shutting down", while Kubernetes takes the
pod out of the Service's endpoints (kube-apiserver keeps sending to an endpoint until then, and
on its kept connections after then too). Every answer from the first SIGTERM on says
`connection: close` and closes its connection: kube-apiserver retires each connection itself
once it has read an answer on it. A connection the server closed while idle could be one
kube-apiserver is writing a request on at that moment, and Go's client does not retry a POST:
that admission fails with `EOF` (seen once in 200 creates during a rollout, when idle
connections were closed at SIGTERM). Then the listener closes, the connections still idle (none
used during the whole drain) are closed, and in-flight requests get `graceful_shutdown` seconds
to finish. A second SIGTERM ends the drain at once. SIGHUP re-reads the certificate files and
serves on: nothing is lost.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from types import FrameType
from typing import Any, Literal

import uvicorn

from hami_dra_webhook.server.connections import ConnectionGuard, ConnectionLimits
from hami_dra_webhook.server.protocol import GuardedHttpProtocol

log = logging.getLogger("hami_dra_webhook.server")


@dataclass
class Lifecycle:
    """What readiness needs to know about the server's own state."""

    # The HTTPS port accepts connections. The operations port can answer before it does (its
    # socket is bound first); ready before then, a Service would send kube-apiserver to a port
    # that refuses it.
    listening: bool = False
    draining: bool = False


class WebhookServer(uvicorn.Server):
    def __init__(
        self,
        config: uvicorn.Config,
        guard: ConnectionGuard,
        lifecycle: Lifecycle,
        drain_delay: float,
        on_hangup: Callable[[], None] = lambda: None,
    ) -> None:
        super().__init__(config)
        self.guard, self.lifecycle = guard, lifecycle
        self.drain_delay = drain_delay
        self._drain_until: float | None = None
        self._on_hangup = on_hangup
        self._hung_up = False

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        """uvicorn's signals, and SIGHUP (reload the certificate). Only the main thread may set
        handlers: a server run from another thread (a test's, an embedding program's) leaves
        the signals alone, as uvicorn does."""
        with super().capture_signals():
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            previous = signal.signal(signal.SIGHUP, self._hangup)
            try:
                yield
            finally:
                signal.signal(signal.SIGHUP, previous)

    def _hangup(self, sig: int, frame: FrameType | None) -> None:
        self._hung_up = True  # acted on in the loop, not in the signal handler

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.guard.retiring = True  # a flag only: safe in a signal handler
        if self._drain_until is None and self.drain_delay > 0 and not self.should_exit:
            self._captured_signals.append(sig)
            self._drain_until = time.monotonic() + self.drain_delay
            self.lifecycle.draining = True
            return
        super().handle_exit(sig, frame)

    async def on_tick(self, counter: int) -> bool:
        if self._hung_up:
            self._hung_up = False
            self._on_hangup()
        if self._drain_until is not None and not self.should_exit:
            if counter % 10 == 0:
                log.info("draining: %.1fs left", max(0.0, self._drain_until - time.monotonic()))
            if time.monotonic() >= self._drain_until:
                self.should_exit = True
        return await super().on_tick(counter)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:  # uvicorn logs why when it could not listen
            self.lifecycle.listening = True
            # The routes as the app has them (server/app.py's Dispatch), not a list kept here.
            posts = ", ".join(getattr(self.config.app, "posts", ()))
            log.info(
                "listening on https://%s:%d: POST %s; GET /healthz, /livez, /readyz, /metrics"
                " (process %d)",
                self.config.host,
                self.config.port,
                posts,
                os.getpid(),
            )

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.lifecycle.draining = True
        self.guard.retiring = True
        self.guard.drop_unproven()
        await super().shutdown(sockets)


class OpsServer(uvicorn.Server):
    """Leaves the signals to the webhook's server and stops when that one has stopped."""

    def __init__(self, config: uvicorn.Config, guard: ConnectionGuard) -> None:
        super().__init__(config)
        self.guard = guard

    def capture_signals(self) -> Any:
        return contextlib.nullcontext()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            log.info(
                "listening on http://%s:%d: /healthz, /livez, /readyz, /metrics",
                self.config.host,
                self.config.port,
            )

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.guard.drop_unproven()
        await super().shutdown(sockets)


def guarded_config(
    app: Any,
    host: str,
    port: int,
    guard: ConnectionGuard,
    *,
    tls: Any = None,
    keep_alive: int,
    graceful_shutdown: float | None = None,
    lifespan: Literal["on", "off"] = "off",
) -> uvicorn.Config:
    """A uvicorn configuration whose connections `guard` accounts for (TLS started by the
    protocol with `tls`, not by uvicorn)."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=functools.partial(GuardedHttpProtocol, guard=guard, tls=tls),  # type: ignore[arg-type]
        ws="none",
        lifespan=lifespan,
        access_log=False,
        log_config=None,
        timeout_graceful_shutdown=int(graceful_shutdown or 0) or None,
        server_header=False,
        limit_concurrency=None,  # the guard counts requests, not connections
        timeout_keep_alive=keep_alive,
    )


def limits_of(settings: Any) -> ConnectionLimits:
    return ConnectionLimits(
        max_connections=settings.max_connections,
        max_unproven=settings.max_unproven_connections,
        head_timeout=settings.head_timeout,
        max_head_bytes=settings.max_head_bytes,
        max_target_bytes=settings.max_target_bytes,
        max_requests=settings.max_concurrency,
        max_headers=settings.max_headers,
        max_pipelined=settings.max_pipelined,
        max_queued=settings.max_queued_requests,
        write_timeout=settings.write_timeout,
        max_write_paused=settings.max_write_paused,
        max_write_paused_bytes=settings.max_write_paused_bytes,
    )
