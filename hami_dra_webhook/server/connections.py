"""Connection accounting for the listening ports: who holds a connection, and who loses it.

A connection is *unproven* from the moment it is accepted (TLS handshake included) until the
head of its first request is complete; then it is *proven*: *idle* between requests, or reading
a head, or busy. What any caller who can reach the port could otherwise do, and what stops it:

- connections that never finish a handshake or a first request (idle or half-sent): at most
  `max_unproven` of them (a new one pushes the oldest out), each for at most `head_timeout`;
- a head (request line and headers) that never ends: `head_timeout` from its first byte, and
  at most `max_head_bytes`; a request target of at most `max_target_bytes`;
- too many connections of any kind: at most `max_connections`; a new one first pushes out the
  oldest that will not read its answers, then the oldest unproven, then the longest idle proven
  one, and is refused only when every connection is in the middle of a request;
- heads with many headers, or many requests pipelined behind the one being answered (each is
  queued with its header list): at most `max_headers` headers a request (431), at most
  `max_pipelined` queued on a connection and `max_queued` on all of them together (past either,
  the connection is closed): a queued head then holds at most `max_head_bytes` plus
  `max_headers` header objects, and the server at most `max_queued` of them;
- connections that do not read their answers (a full send buffer): each for at most
  `write_timeout` from the moment its buffer filled, at most `max_write_paused` of them holding
  at most `max_write_paused_bytes` together (past either, the oldest is closed).

Proven connections (kube-apiserver's keep-alive pool) are never pushed out for unproven ones, so
a flood of new connections cannot starve them, and requests (not connections) count toward the
concurrency limit. One timer sweeps the deadlines twice a second; the hot path only moves a
connection between dicts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

SWEEP_INTERVAL = 0.5


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_connections: int = 2048
    max_unproven: int = 256
    head_timeout: float = 10.0
    max_head_bytes: int = 32 * 1024
    max_target_bytes: int = 8 * 1024
    max_requests: int = 1024
    max_headers: int = 128
    max_pipelined: int = 4
    max_queued: int = 256
    write_timeout: float = 10.0
    max_write_paused: int = 64
    max_write_paused_bytes: int = 32 * 1024 * 1024


class Closable(Protocol):
    idle_since: float | None  # set by the protocol between requests (time.monotonic())

    def drop(self) -> None:
        """Close the connection at once (it is being pushed out or timed out)."""
        ...

    def unsent_bytes(self) -> int:
        """What its send buffer holds."""
        ...

    def draining(self) -> bool:
        """Whether an answer still waits on the peer to read it."""
        ...


class ConnectionGuard:
    """The accounting shared by every connection of one listening port. The hot path (a
    whole request head in one read, on a proven connection) touches none of it."""

    def __init__(
        self,
        limits: ConnectionLimits,
        on_drop: Callable[[str], None] = lambda reason: None,
        clock: Callable[[], float] | None = None,
        on_closed: Callable[[], None] = lambda: None,
    ) -> None:
        self.limits = limits
        self._on_drop = on_drop
        self._clock = clock
        # A burst of connections leaves its memory scattered over the heap: handed back once
        # they are gone (memory.trim_soon: at most once a second).
        self._on_closed = on_closed
        # Insertion-ordered: the first entry is the oldest. Values: when the state began.
        self.unproven: dict[Closable, float] = {}
        self.heads: dict[Closable, float] = {}  # proven, with a head that did not come whole
        self.proven: set[Closable] = set()
        self.write_paused: dict[Closable, float] = {}  # a full send buffer, since
        self.queued = 0  # pipelined requests waiting, on every connection (protocol.py)
        self.lingering = 0  # connections reading the rest of a refused body (protocol.py)
        # The server is going away (its drain has begun): every answer closes its connection,
        # so that the client retires each one itself after reading an answer, instead of the
        # server closing it at the end while the client may be writing a request on it.
        self.retiring = False
        self._sweeping: asyncio.TimerHandle | None = None

    @property
    def open(self) -> int:
        return len(self.unproven) + len(self.proven)

    def _now(self) -> float:
        if self._clock is not None:
            return self._clock()
        return asyncio.get_running_loop().time()

    def accepted(self, connection: Closable) -> bool:
        """A new connection; False when it must be closed at once (everything is busy)."""
        limits = self.limits
        if len(self.unproven) >= limits.max_unproven:
            self._push_out(self.unproven, "unproven_pushed_out")
        if self.open >= limits.max_connections and not self._make_room():
            self._on_drop("connections_full")
            return False
        self.unproven[connection] = self._now()
        self._arm()
        return True

    def _make_room(self) -> bool:
        if self.write_paused:
            self.proven.discard(self._push_out(self.write_paused, "write_paused_pushed_out"))
            return True
        if self.unproven:
            self._push_out(self.unproven, "unproven_pushed_out")
            return True
        idle = [c for c in self.proven if c.idle_since is not None]
        if not idle:
            return False
        longest = min(idle, key=lambda c: c.idle_since or 0.0)
        self.proven.discard(longest)
        self.heads.pop(longest, None)
        self._on_drop("idle_pushed_out")
        longest.drop()
        return True

    def dropped(self, reason: str) -> None:
        """Something the protocol refused or closed, counted under `reason`."""
        self._on_drop(reason)

    def drop_unproven(self) -> None:
        """On shutdown: connections that never sent a request are not waited for."""
        while self.unproven:
            self._push_out(self.unproven, "shutdown")

    def proven_now(self, connection: Closable) -> None:
        """Its first request head is complete."""
        if self.unproven.pop(connection, None) is not None:
            self.proven.add(connection)

    def head_pending(self, connection: Closable) -> None:
        """A proven connection has part of a head: the rest must come in time."""
        self.heads[connection] = self._now()
        self._arm()

    def head_done(self, connection: Closable) -> None:
        self.heads.pop(connection, None)

    def writes_paused(self, connection: Closable) -> None:
        """Its send buffer is full (the peer does not read): it has `write_timeout` to drain,
        and the oldest such connections go first when they are too many or hold too much."""
        if connection in self.write_paused:
            return  # the deadline runs from the first time
        self.write_paused[connection] = self._now()
        limits = self.limits
        while len(self.write_paused) > limits.max_write_paused or (
            len(self.write_paused) > 1
            and sum(c.unsent_bytes() for c in self.write_paused) > limits.max_write_paused_bytes
        ):
            self._push_out(self.write_paused, "write_paused_pushed_out")
        self._arm()

    def writes_resumed(self, connection: Closable) -> None:
        self.write_paused.pop(connection, None)

    def may_queue(self) -> bool:
        """Whether one more pipelined request may wait (all connections together)."""
        return self.queued < self.limits.max_queued

    def closed(self, connection: Closable) -> None:
        """An accepted connection is gone (called once for each `accepted` that was True)."""
        self.unproven.pop(connection, None)
        self.heads.pop(connection, None)
        self.write_paused.pop(connection, None)
        self.proven.discard(connection)
        self._on_closed()

    def _push_out(self, table: dict[Closable, float], reason: str) -> Closable:
        oldest = next(iter(table))
        del table[oldest]
        self._on_drop(reason)
        oldest.drop()
        return oldest

    def _arm(self) -> None:
        if self._sweeping is None and self._clock is None:
            loop = asyncio.get_running_loop()
            self._sweeping = loop.call_later(SWEEP_INTERVAL, self._sweep_and_rearm)

    def _sweep_and_rearm(self) -> None:
        self._sweeping = None
        self.sweep()
        if self.unproven or self.heads or self.write_paused:
            self._arm()

    def sweep(self) -> None:
        """Drop every connection whose handshake, first request or head is overdue, or whose
        answer has gone unread too long."""
        now = self._now()
        limits = self.limits
        for connection in [c for c in self.write_paused if not c.draining()]:
            del self.write_paused[connection]  # its peer read what it was sent
        for table, reason, timeout in (
            (self.unproven, "unproven_timeout", limits.head_timeout),
            (self.heads, "head_timeout", limits.head_timeout),
            (self.write_paused, "write_timeout", limits.write_timeout),
        ):
            cutoff = now - timeout
            while table:
                oldest, since = next(iter(table.items()))
                if since > cutoff:
                    break
                del table[oldest]
                self._on_drop(reason)
                oldest.drop()
