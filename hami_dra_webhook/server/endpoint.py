"""A plain ASGI endpoint for the hot path: the body is read with a size limit, a deadline and a
share of the bytes all bodies in flight may hold, then handed to a function that returns the
status and the JSON bytes. No Request or Response objects are built, which is most of what a
framework costs per request.

A connection that carried a large body or answer (over the free share, 64 KiB) is closed after
the answer: its TLS buffers keep the size of the largest record they ever held for as long as
the connection lives (seen: ~280 KiB a connection after 108 KB answers, 600 such connections
+338 MiB), and a normal admission is a few KiB, so only the rare large one pays a new handshake.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from starlette.types import Receive, Scope, Send

from hami_dra_webhook.admission.handler import message

Handler = Callable[[bytes], Awaitable[tuple[int, bytes]]]
JSON = b"application/json"


class ClientGone(Exception):
    """The client disconnected before sending the whole body."""


class BodyBudget:
    """The bytes that request bodies may hold at once, together. Each request reads its first
    `free_bytes` without asking (an AdmissionReview is a few KiB: those are never refused, and
    the concurrency limit bounds them); beyond that it takes from the shared `max_bytes` and
    gives back when answered; a body read whole takes its size once more before it is decoded
    (its decoded objects). So many large bodies at once cannot take the memory the process
    has, and a normal review is never refused because large ones are in flight."""

    def __init__(
        self,
        max_bytes: int,
        free_bytes: int = 64 * 1024,
        on_drained: Callable[[], None] = lambda: None,
    ) -> None:
        self.max_bytes, self.free_bytes = max_bytes, free_bytes
        self.held = 0
        self._on_drained = on_drained  # large bodies all answered: their memory can go back

    def take(self, size: int) -> bool:
        if self.held + size > self.max_bytes:
            return False
        self.held += size
        return True

    def give_back(self, size: int) -> None:
        if size:
            self.held -= size
            if self.held == 0:
                self._on_drained()


class _Charge:
    """What one request took from the budget (given back however the request ends)."""

    __slots__ = ("taken",)

    def __init__(self) -> None:
        self.taken = 0


class BodyEndpoint:
    def __init__(
        self,
        handler: Handler,
        limit: int,
        timeout: float,
        on_rejected: Callable[[int], None],
        budget: BodyBudget | None = None,
    ) -> None:
        self.handler, self.limit, self.timeout = handler, limit, timeout
        self.on_rejected = on_rejected
        self.budget = budget or BodyBudget(max_bytes=1 << 62)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        charge = _Charge()
        try:
            await self._answer(scope, receive, send, charge)
        finally:
            self.budget.give_back(charge.taken)

    async def _answer(self, scope: Scope, receive: Receive, send: Send, charge: _Charge) -> None:
        try:
            body = await self._read(scope, receive, charge)
        except ClientGone:
            return
        if isinstance(body, tuple):
            status, data = body
            self.on_rejected(status)
        elif not self._charge(charge, 2 * len(body)):
            # A large body is decoded into objects about its own size: they count too, so
            # bodies in flight and what they decode into stay within the budget together.
            status, data = self._busy()
            self.on_rejected(status)
        else:
            status, data = await self.handler(body)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(data)).encode()),
        ]
        free = self.budget.free_bytes
        if len(data) > free or (not isinstance(body, tuple) and len(body) > free):
            headers.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data})

    def _charge(self, charge: _Charge, size: int) -> bool:
        """Take from the budget what `size` bytes of body need beyond the free share."""
        wanted = size - self.budget.free_bytes - charge.taken
        if wanted <= 0:
            return True
        if not self.budget.take(wanted):
            return False
        charge.taken += wanted
        return True

    def _busy(self) -> tuple[int, bytes]:
        return message(
            503,
            f"request bodies in flight already hold {self.budget.held} of"
            f" {self.budget.max_bytes} bytes; retry",
        )

    async def _read(
        self, scope: Scope, receive: Receive, charge: _Charge
    ) -> bytes | tuple[int, bytes]:
        too_big = message(413, f"the body is over {self.limit} bytes; AdmissionReviews are smaller")
        media = b""
        for name, value in scope["headers"]:
            if name == b"content-type":  # kube-apiserver's exact value, else parsed
                media = value if value == JSON else value.split(b";", 1)[0].strip().lower()
            elif name == b"content-length" and value.isdigit():
                if int(value) > self.limit:
                    return too_big
                if not self._charge(charge, int(value)):
                    return self._busy()
        if media != JSON:  # kube-apiserver sends it; as kyverno, 415 otherwise
            shown = media.decode("latin-1")[:80] or "none"
            return message(
                415, f"Content-Type {shown!r}: an AdmissionReview is sent as application/json"
            )
        # A plain timer instead of asyncio.timeout(): the same effect for a fraction of the cost.
        task = asyncio.current_task()
        assert task is not None
        expired = False

        def expire() -> None:
            nonlocal expired
            expired = True
            task.cancel()

        timer = asyncio.get_running_loop().call_later(self.timeout, expire)
        chunks: list[bytes] = []
        size = 0
        try:
            while True:
                event = await receive()
                if event["type"] == "http.disconnect":
                    raise ClientGone
                chunk = event.get("body", b"")
                size += len(chunk)
                if size > self.limit:
                    return too_big
                if not self._charge(charge, size):
                    return self._busy()
                chunks.append(chunk)
                if not event.get("more_body", False):
                    break
        except asyncio.CancelledError:
            if not expired:
                raise
            task.uncancel()
            return message(408, f"the body did not arrive within {self.timeout:g}s")
        finally:
            timer.cancel()
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
