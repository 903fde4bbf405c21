"""Collections a node move or a wave reads every second, kept by one watch instead (issue 62):
the cluster's ResourceClaims (what the driver holds on a node: their allocation is no field a
selector can ask for) and its Pending pods (a wave's settling). A reader waits for the first
list, and reads the API itself when the watch cannot stand (then once a second, as before)."""

from __future__ import annotations

import asyncio
import time
from types import TracebackType

from hami_dra_webhook.cluster.tasks import stop_task
from hami_dra_webhook.cluster.watched import Kept, Watched
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.kube.port import KubeApi, paths

PENDING = [("fieldSelector", "status.phase=Pending")]


class KeptList:
    """`async with KeptList(api, path, query, name) as kept: await kept.items()`."""

    def __init__(
        self, api: KubeApi, path: str, query: list[tuple[str, str]], name: str, wait: float = 10.0
    ) -> None:
        self.api, self.path, self.query, self.wait = api, path, query, wait
        self.kept = Kept()
        self.watched = Watched(
            api, path, query, name, on_list=self.kept.listed, on_event=self.kept.seen
        )
        self._task: asyncio.Task[None] | None = None
        self._started = 0.0

    async def __aenter__(self) -> KeptList:
        self._task = asyncio.get_running_loop().create_task(self.watched.run())
        self._started = time.monotonic()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._task is not None:
            await stop_task(self._task)

    async def items(self, timeout: float) -> list[JsonObject]:
        """The objects now: the watch's, once it stands; the API's own list while it does not
        (within `wait` seconds of the start, the first list is waited for)."""
        while not self.watched.synced and time.monotonic() - self._started < self.wait:
            await asyncio.sleep(0.05)
        if self.watched.synced:
            return list(self.kept.items.values())
        return await self.api.list_path(self.path, self.query, timeout=timeout)


def claims(api: KubeApi) -> KeptList:
    return KeptList(api, paths.ALL_CLAIMS, [], "ResourceClaims")


def pending_pods(api: KubeApi) -> KeptList:
    return KeptList(api, paths.ALL_PODS, PENDING, "Pending pods")
