"""Ending a background task of the cluster side without losing the cancellation of the one
that ends it."""

from __future__ import annotations

import asyncio
from typing import Any


async def stop_task(task: asyncio.Future[Any]) -> None:
    """Cancel `task` and wait for it to end; its own cancellation is the expected end. A
    cancellation of the waiting task is never swallowed: `contextlib.suppress(CancelledError)`
    around `await task` swallows one that lands while it waits (the cancelled task ends, and the
    cancel meant for the waiter surfaces at that very await, as a CancelledError like the
    task's own), and the waiter then goes on as if nobody had asked it to stop. A failure of
    `task` is raised here."""
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        waiting = asyncio.current_task()
        if waiting is not None and waiting.cancelling():
            raise
