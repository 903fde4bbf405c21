"""uvicorn's httptools protocol, held to the limits of `connections.ConnectionGuard`.

uvicorn enforces none of what a caller who can reach the port could abuse: no deadline for a
TLS handshake or a first request (its keep-alive timer starts after a first response), no limit
on a request target or on headers (httptools grows both without bound), no bound on requests
pipelined behind the one being answered (each is queued with its whole header list, and a read
can hold hundreds), no deadline for an answer its client never reads (the request stays busy
forever), and it counts idle connections toward its concurrency limit, so that idle ones starve
working ones. This protocol adds each of them. TLS is started here (`loop.start_tls`) rather
than by the listening server, so that a connection is counted from the moment it is accepted,
handshake included.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable, Coroutine
from typing import Any

import httptools
from uvicorn.protocols.http.flow_control import service_unavailable
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from hami_dra_webhook.admission.handler import message
from hami_dra_webhook.server.connections import ConnectionGuard

# A TLS connection's send buffer (uvloop's default is 512 KiB before the application is told
# to wait) holds at most this much before an answer waits, as a plain TCP one does; and an
# answered connection still holding more than this unsent is watched like a paused one.
WRITE_HIGH_WATER = 64 * 1024
# A connection the server closes after an answer waits this long for the peer's close_notify,
# then is aborted (uvloop waits 30 s, with the connection's TLS buffers kept meanwhile; its own
# ssl_shutdown_timeout was tried: its timeout path left ~40 MiB unreturned after 80 large
# bodies, the abort here does not).
TLS_SHUTDOWN_TIMEOUT = 1.0
# What is read and dropped of a body after its refusal (see on_response_complete).
LINGER_BYTES = 8 * 1024 * 1024
LINGER_SECONDS = 1.0
MAX_LINGERING = 4  # connections lingering at once, per port


class _PipelineFull(Exception):
    """Raised inside a parser callback: a request beyond the pipelining limits; the parser
    stops, the requests already queued are answered, then the connection is closed."""


class _Refused(Exception):
    """Raised inside a parser callback: the parser stops, the request is answered and closed."""

    def __init__(self, status: int, text: str, reason: str) -> None:
        super().__init__(text)
        self.status, self.text, self.reason = status, text, reason


def _step_now(
    coroutine: Coroutine[Any, Any, Any],
    done: Callable[[Any, BaseException | None], None],
) -> None:
    """Run `coroutine` as a task would, but its first step at once, in the caller's frame;
    `done(result, error)` when it ends. Each later step runs when the future it awaits is
    done (an awaited future re-raises its own error inside the coroutine)."""

    def step(_: object = None) -> None:
        try:
            awaited = coroutine.send(None)
        except StopIteration as finished:
            done(finished.value, None)
        except BaseException as error:  # handed to `done`, never lost
            done(None, error)
        else:
            awaited._asyncio_future_blocking = False
            awaited.add_done_callback(step)

    step()


class GuardedHttpProtocol(HttpToolsProtocol):
    def __init__(
        self,
        config: Any,
        server_state: Any,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
        *,
        guard: ConnectionGuard,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.guard = guard
        self._tls = tls
        self._raw: asyncio.Transport | None = None
        self._accepted = self._connected = False
        self._head_bytes = 0  # bytes read while a head is open (a head that never ends)
        self._tail = b""  # the last bytes of a head that came in pieces
        self._early = b""  # bytes decrypted before the TLS transport was handed over
        self._early_paused = False  # the socket's reading paused while they wait
        self._lingering, self._linger_left = False, 0
        self._proven = self._head_tracked = False
        self._queued = 0  # this connection's requests in uvicorn's pipeline queue
        self._finishing = False  # pipelined too deep: answer what is queued, then close
        self.idle_since: float | None = None
        limits = guard.limits
        self._max_head, self._max_target = limits.max_head_bytes, limits.max_target_bytes
        self._max_requests, self._max_headers = limits.max_requests, limits.max_headers
        self._max_pipelined = limits.max_pipelined

    # The connection's life: accepted, TLS, HTTP, gone.

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._raw = transport  # uvloop's transports are not asyncio.Transport subclasses
        if not self.guard.accepted(self):
            transport.abort()
            return
        self._accepted = True
        if self._tls is None:
            self._connect(transport)
            return
        handshake = self.loop.start_tls(
            transport,
            self,
            self._tls,
            server_side=True,
            ssl_handshake_timeout=self.guard.limits.head_timeout,
        )
        # Its first step runs now, inside connection_made: uvloop starts reading as soon as
        # connection_made returns (a pause_reading() here is not honoured), so the TLS
        # protocol must own the transport by then, or the ClientHello would come here.
        _step_now(handshake, self._handshake_done)

    def _handshake_done(
        self, secure: asyncio.Transport | None, error: BaseException | None
    ) -> None:
        if error is not None or secure is None or secure.is_closing():
            # A failed, late or dropped handshake (start_tls has closed the transport).
            if self._raw is not None:
                self._raw.abort()
            self._gone()
            return
        self._connect(secure)

    def _connect(self, transport: asyncio.Transport) -> None:
        self._connected = True
        if transport is not self._raw:
            transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        super().connection_made(transport)
        if self._early_paused and self._raw is not None:
            # Resumed first: the socket is read in a later callback, after the bytes below,
            # and whatever they make pause it (a refusal, a full pipeline) stays paused.
            self._early_paused = False
            self._raw.resume_reading()
        if self._early:
            early, self._early = self._early, b""
            self.data_received(early)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._lingering:
            self._stop_lingering()
        if self._connected:
            super().connection_lost(exc)
            # uvicorn cancels the keep-alive timer only for a clean close: after a reset it
            # held the connection (TLS objects, buffers: ~90 KiB) until the idle timeout, 120 s,
            # so a caller resetting connections made it keep ~90 KiB each for two minutes.
            self._unset_keepalive_if_required()
            self.pipeline.clear()  # never to be answered: their heads go now
        self._unqueue(self._queued)
        self._gone()

    def _gone(self) -> None:
        if self._accepted:
            self._accepted = False
            self.guard.closed(self)

    def drop(self) -> None:
        """Pushed out or overdue: closed at once, without a goodbye."""
        if self._connected:
            self.transport.abort()
        elif self._raw is not None:
            self._raw.abort()  # the handshake fails, and _handshake_done accounts for it

    def unsent_bytes(self) -> int:
        """What waits to be sent: in the TLS layer and in the socket's transport."""
        waiting = self._raw.get_write_buffer_size() if self._raw is not None else 0
        if self._connected and self.transport is not self._raw:
            waiting += self.transport.get_write_buffer_size()
        return waiting

    def draining(self) -> bool:
        """Whether an answer still waits on the peer to read it."""
        return self.flow.write_paused or self.unsent_bytes() > WRITE_HIGH_WATER

    # Writing answers: a send buffer that fills (the peer does not read) starts a deadline.

    def pause_writing(self) -> None:
        super().pause_writing()
        self.guard.writes_paused(self)

    def resume_writing(self) -> None:
        super().resume_writing()
        self.guard.writes_resumed(self)

    def _unqueue(self, count: int) -> None:
        self._queued -= count
        self.guard.queued -= count

    # Reading requests. The common case, a whole head in one read, costs one length check;
    # only a head that comes in pieces, or is too long, takes the slower paths.

    def data_received(self, data: bytes) -> None:
        if not self._connected:
            # asyncio's own loop (without uvloop) hands over the first decrypted bytes as the
            # handshake completes, before start_tls has returned the TLS transport: kept
            # until the connection is made, when they are read as any other bytes are. Past a
            # head's worth (a request and its body sent with the client's Finished), nothing
            # more is read from the socket until then.
            self._early += data
            if len(self._early) > self._max_head and self._raw is not None:
                self._raw.pause_reading()
                self._early_paused = True
            return
        if self._finishing:
            return  # nothing more is parsed: what is queued is answered, then it closes
        self._unset_keepalive_if_required()
        if self._lingering:
            self._linger_left -= len(data)
            if self._linger_left < 0:
                self._stop_lingering()
                self._cut_off()
                return
        cycle = self.cycle
        head_open = cycle is None or not cycle.more_body  # not inside a request's body
        if head_open:
            if self._head_bytes + len(data) > self._max_head and not self._head_ends_in(data):
                self._refuse(
                    431,
                    f"the request line and headers are over {self._max_head} bytes",
                    "head_too_large",
                )
                return
            self._head_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            pass  # no upgrades are served; the request itself was answered as usual
        except httptools.HttpParserError as error:
            refused = error.__context__
            if isinstance(refused, _PipelineFull):
                self._finish_queued()
            elif isinstance(refused, _Refused):
                self._refuse(refused.status, refused.text, refused.reason)
            else:
                self._refuse(400, "invalid HTTP request", "malformed_http")
            return
        if self._lingering and not self.cycle.more_body:  # the refused body is all read
            self._stop_lingering()
        if head_open and self._head_bytes:
            # Part of a head (no new request began): the rest has a deadline.
            self._tail = data[-3:]
            if self._proven and not self._head_tracked:
                self._head_tracked = True
                self.guard.head_pending(self)

    def _head_ends_in(self, data: bytes) -> bool:
        """Whether the head being read ends in `data` within the limit (the rest is body)."""
        joined = self._tail + data
        return joined.find(b"\r\n\r\n", 0, self._max_head - self._head_bytes + len(self._tail)) >= 0

    def on_headers_complete(self) -> None:
        if len(self.url) > self._max_target:
            raise _Refused(
                414, f"the request target is over {self._max_target} bytes", "target_too_long"
            )
        if len(self.headers) > self._max_headers:
            raise _Refused(
                431, f"the request has over {self._max_headers} headers", "too_many_headers"
            )
        if self.cycle is not None and not self.cycle.response_complete:
            # Pipelined behind an answer not yet sent: uvicorn queues it, header list and all.
            if self._queued >= self._max_pipelined or not self.guard.may_queue():
                raise _PipelineFull
            self._queued += 1
            self.guard.queued += 1
        self._head_bytes, self._tail = 0, b""
        self.idle_since = None
        if not self._proven:
            self._proven = True
            self.guard.proven_now(self)
        elif self._head_tracked:
            self._head_tracked = False
            self.guard.head_done(self)
        if len(self.tasks) < self._max_requests:
            super().on_headers_complete()
        else:
            self.guard.dropped("busy")
            app, self.app = self.app, service_unavailable  # this one request only
            try:
                super().on_headers_complete()
            finally:
                self.app = app
        if self.guard.retiring:
            # Draining: the answer says `connection: close` and the connection closes after it
            # (uvicorn's cycle does both), so the client never reuses it.
            self.cycle.keep_alive = False

    def on_response_complete(self) -> None:
        # Answered before its body was read to the end (a refusal, a GET with a body): the rest
        # is read and dropped for at most a second and LINGER_BYTES, so that a client that
        # sends its body before reading the answer still gets it; then the connection is cut
        # (otherwise the rest would hold it with no deadline).
        unread = not self.pipeline and self.cycle is not None and self.cycle.more_body
        waiting = len(self.pipeline)
        super().on_response_complete()
        self._unqueue(waiting - len(self.pipeline))  # the next pipelined request has started
        if self.unsent_bytes() > WRITE_HIGH_WATER:
            # Answered, but the answer is not read: as good as a paused write (a closing
            # connection waits for it too, so it gets the same deadline).
            self.guard.writes_paused(self)
        if self.transport.is_closing():  # closed after this answer (Connection: close)
            self.loop.call_later(TLS_SHUTDOWN_TIMEOUT, self.transport.abort)
        if not unread or self.transport.is_closing():
            self.idle_since = time.monotonic()
        elif self.guard.lingering >= MAX_LINGERING:  # many at once: an attack, not a client
            self._cut_off()
        else:
            self.guard.lingering += 1
            self._lingering, self._linger_left = True, LINGER_BYTES
            self.loop.call_later(LINGER_SECONDS, self._linger_over)

    def _finish_queued(self) -> None:
        """Pipelined past the limits: read nothing more (not even decrypted), answer the
        requests already queued, and close after the last of them."""
        self.guard.dropped("pipeline_full")
        self._finishing = True
        if self._raw is not None:
            self._raw.pause_reading()
        last = self.pipeline[0][0] if self.pipeline else self.cycle
        if last is None or last.response_complete:
            self.transport.close()
        else:
            last.keep_alive = False  # uvicorn closes the connection after its answer

    def _stop_lingering(self) -> None:
        self._lingering = False
        self.guard.lingering -= 1

    def _linger_over(self) -> None:
        if self._lingering:
            self._stop_lingering()
            self._cut_off()

    def _refuse(self, status: int, text: str, reason: str) -> None:
        self.guard.dropped(reason)
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            self.transport.abort()  # an answer is still being written: no second one
            return
        status, body = message(status, text)  # the shape every refusal of the server has
        self.transport.write(
            b"".join(
                (
                    STATUS_LINE[status],
                    b"content-type: application/json\r\n",
                    b"content-length: %d\r\n" % len(body),
                    b"connection: close\r\n\r\n",
                    body,
                )
            )
        )
        self._cut_off()

    def _cut_off(self) -> None:
        """Close after the answer, reading nothing more: not even decrypting it (a client that
        keeps sending would otherwise cost a core), and abort after a second, since a TLS
        close waits for the peer's."""
        if self._raw is not None:
            self._raw.pause_reading()
        self.transport.close()
        self.loop.call_later(1.0, self.transport.abort)
