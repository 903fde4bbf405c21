"""Namespaces waiting for the GPU quota work, as a controller's work queue keeps its keys: each
at most once in the queue, never in two workers' hands at once (one added while it is being
worked on comes back once that turn ends), not taken again within `gap` seconds of its last
turn (a burst of events is one count), and the cheapest first (the seconds its last turn
took), so that one namespace of many pods delays no other's release."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable


class NamespaceQueue:
    def __init__(self, gap: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.gap, self._clock = gap, clock
        self.cost: dict[str, float] = {}  # seconds each namespace's last turn took
        self._pending: set[str] = set()
        self._busy: set[str] = set()
        self._again: set[str] = set()
        self._last: dict[str, float] = {}  # when each namespace's last turn ended
        self._wakeup = asyncio.Event()

    def __len__(self) -> int:
        return len(self._pending) + len(self._again)

    def add(self, namespace: str) -> None:
        if namespace in self._busy:
            self._again.add(namespace)
            return
        self._pending.add(namespace)
        self._wake()

    async def take(self) -> str:
        """The next namespace to work on (wait until one is due)."""
        while True:
            now = self._clock()
            due = [n for n in self._pending if now - self._last.get(n, now - self.gap) >= self.gap]
            if due:
                chosen = min(due, key=lambda n: (self.cost.get(n, 0.0), n))
                self._pending.discard(chosen)
                self._busy.add(chosen)
                return chosen
            # (no await between the look and the clear: an add cannot slip in unseen)
            self._wakeup.clear()
            later = [self._last[n] + self.gap - now for n in self._pending]
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for loses a cancellation that
            # lands as the wait ends (gh-86296), and a worker cancelled with the Lease would
            # take a namespace and release its pods without it.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(later, default=None)):
                    await self._wakeup.wait()

    def done(self, namespace: str, seconds: float) -> None:
        """A turn ended, after `seconds`."""
        self._busy.discard(namespace)
        now = self._clock()
        self._last[namespace] = now
        self.cost[namespace] = seconds
        if len(self._last) > 4 * (len(self._pending) + len(self._busy)) + 1024:
            self._last = {n: t for n, t in self._last.items() if now - t < self.gap}
        if namespace in self._again:
            self._again.discard(namespace)
            self._pending.add(namespace)
        self._wake()

    def _wake(self) -> None:
        self._wakeup.set()
