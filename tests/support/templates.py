"""ResourceClaimTemplates as the webhook makes them, and the template store driven from a test,
for the tests of the store, GC, squatting and the serve shell."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from typing import Any

from hami_dra_webhook.cluster.templates.store import ApiTemplateStore
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from hami_dra_webhook.core.translate.pod import translate_pod
from tests.support.cluster import Cluster
from tests.support.loop import run


def templates(memory: str | int = "4000", namespace: str = "team-a") -> list[dict[str, Any]]:
    pod = {
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "resources": {
                        "limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(memory)}
                    },
                }
            ]
        }
    }
    return translate_pod(pod, DEFAULT_POLICY, namespace).templates


def ensure(
    store: ApiTemplateStore,
    items: list[dict[str, Any]],
    dry_run: bool = False,
    budget: float = 3.0,
    namespace: str = "team-a",
) -> list[str]:
    return run(store.ensure(namespace, items, dry_run=dry_run, deadline=time.monotonic() + budget))


def stored(kube: Cluster, namespace: str) -> list[dict[str, Any]]:
    return list(kube.get("resourceclaimtemplates", "-n", namespace)["items"])


@contextlib.contextmanager
def watching(store: ApiTemplateStore, within: float = 30.0, **options: Any) -> Iterator[None]:
    """The store's own watch standing on the real kube-apiserver for the block (its cache is
    used only while the watch stands); `run` calls inside the block share its event loop.
    `options` go to the watch job's `run` (retry, window)."""

    async def start() -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(store.watch.run(**options))
        deadline = time.monotonic() + within
        while not store.watching:
            assert time.monotonic() < deadline, (
                f"the watch did not start: {store.watch.watch_state}"
            )
            await asyncio.sleep(0.02)
        return task

    async def stop(task: asyncio.Task[None]) -> None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    task = run(start())
    try:
        yield
    finally:
        run(stop(task))
