"""One event loop for every test that drives the API adapter: an aiohttp session belongs to the
loop it starts on, so the tests run their coroutines on a shared runner, not one
`asyncio.run` each (which would start and close a loop per call)."""

from __future__ import annotations

import asyncio
import atexit
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
_runner: asyncio.Runner | None = None


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    global _runner  # noqa: PLW0603 (one runner per test process)
    if _runner is None:
        _runner = asyncio.Runner()
        atexit.register(_runner.close)
    return _runner.run(coroutine)
