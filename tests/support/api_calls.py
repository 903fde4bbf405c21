"""A `KubeApi` wrapper for tests against the real kube-apiserver: it passes every call on to the
real adapter, counts the calls, and can run a hook just before or just after one (to play a race
at an exact point: another replica's GC, a concurrent admission, a delete right after a
confirmation). The answers are the real server's."""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Callable
from typing import Any

from hami_dra_webhook.kube.port import KubeApi


class CallsThrough:
    def __init__(self, api: KubeApi) -> None:
        self._api = api
        self.calls: Counter[str] = Counter()
        self.before: dict[str, Callable[[], Any]] = {}
        self.after: dict[str, Callable[[], Any]] = {}

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._api, name)
        if not inspect.iscoroutinefunction(target):
            return target

        async def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            await _hook(self.before.pop(name, None))
            answer = await target(*args, **kwargs)
            await _hook(self.after.pop(name, None))
            return answer

        return call


async def _hook(hook: Callable[[], Any] | None) -> None:
    if hook is not None:
        result = hook()
        if hasattr(result, "__await__"):
            await result
