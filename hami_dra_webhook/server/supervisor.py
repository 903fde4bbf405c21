"""The webhook's background work, in one place: each job named, run for the server's life,
restarted with a doubling backoff when it dies (an exception, or returning), its death logged
at once with its traceback and counted, and `/readyz` failing while a job the webhook needs is
down (controller-runtime's Manager and its Runnables are the model).

A job is a coroutine function that normally never returns: the certificate files' reload, the
template watch, the cluster check, the template garbage collection, the self-managed
certificate's renewal.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("hami_dra_webhook.server")

FIRST_BACKOFF = 1.0
LONGEST_BACKOFF = 60.0


@dataclass(frozen=True)
class Job:
    name: str
    run: Callable[[], Coroutine[Any, Any, None]]
    # Needed for admissions to be right (the template watch, the certificates): /readyz
    # fails while it is down.
    needed: bool = False


@dataclass
class JobState:
    running: bool = False
    restarts: int = 0
    last_error: str = ""


class Supervisor:
    """Runs `jobs` until `stop()`; `on_restart(name)` is told of each death (a metric)."""

    def __init__(
        self,
        jobs: list[Job],
        on_restart: Callable[[str], None] = lambda _: None,
        first_backoff: float = FIRST_BACKOFF,
        longest_backoff: float = LONGEST_BACKOFF,
    ) -> None:
        names = [job.name for job in jobs]
        if len(set(names)) != len(names):
            raise ValueError(f"background job names must differ: {names}")
        self.jobs = jobs
        self.states = {job.name: JobState() for job in jobs}
        self._on_restart = on_restart
        self._first, self._longest = first_backoff, longest_backoff
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [
            asyncio.get_running_loop().create_task(self._keep(job), name=f"job {job.name}")
            for job in self.jobs
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    def down(self, needed_only: bool = True) -> list[str]:
        """The jobs not running now (those the webhook needs, unless `needed_only` is False)."""
        return [
            job.name
            for job in self.jobs
            if not self.states[job.name].running and (job.needed or not needed_only)
        ]

    def detail(self) -> dict[str, str]:
        """Each job's state in words, for /readyz."""
        words = {}
        for job in self.jobs:
            state = self.states[job.name]
            if state.running:
                words[job.name] = "running" + (
                    f" (restarted {state.restarts}x; last: {state.last_error})"
                    if state.restarts
                    else ""
                )
            else:
                words[job.name] = f"down, restarting: {state.last_error or 'not started'}"
        return words

    async def _keep(self, job: Job) -> None:
        state = self.states[job.name]
        wait = self._first
        while True:
            state.running = True
            started = time.monotonic()
            try:
                await job.run()
                state.last_error = "it returned"
                log.error("background job %s returned; restarting it in %gs", job.name, wait)
            except asyncio.CancelledError:
                state.running = False
                raise
            except Exception as error:
                state.last_error = f"{type(error).__name__}: {error}"[:200]
                log.exception("background job %s died; restarting it in %gs", job.name, wait)
            state.running = False
            state.restarts += 1
            self._on_restart(job.name)
            if time.monotonic() - started > self._longest:
                wait = self._first  # it ran well for a while: start the backoff over
            await asyncio.sleep(wait)
            wait = min(wait * 2, self._longest)
