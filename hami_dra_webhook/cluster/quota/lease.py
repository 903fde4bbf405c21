"""One replica at a time does the GPU quota work, by a coordination.k8s.io Lease, as
controller-runtime's leader election does it (issue 62): the holder renews it on a loop of its
own (every third of its duration, from the object it last wrote: one PUT, no GET), and the work
runs only while it is held: cancelled at once when a renewal fails or another holder is seen,
so that a pass never half-writes under a lost lease. On shutdown the holder releases it (an
empty holder), and the others, which watch the Lease instead of asking for it, take it within
a moment; a holder that died without releasing it is replaced once its duration has passed."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from hami_dra_webhook.cluster.tasks import stop_task
from hami_dra_webhook.core.model import kube_time
from hami_dra_webhook.core.model.lease_view import LeaseView
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.kube.port import ApiError, KubeApi, paths

log = logging.getLogger("hami_dra_webhook.quota")
RELEASE_TIMEOUT = 2.0  # what a shutdown waits for the release


def _spec(lease: JsonObject | None) -> JsonObject:
    spec = (lease or {}).get("spec")
    return spec if isinstance(spec, dict) else {}


@dataclass
class Lease:
    api: KubeApi
    namespace: str
    name: str
    identity: str
    duration: int = 15  # seconds
    timeout: float = 5.0
    _valid_until: float = 0.0  # monotonic: this process holds it until then
    _current: JsonObject | None = field(default=None, repr=False)  # as last read or written
    transitions: int = 0  # times this replica took it (a metric, a test)

    @property
    def _where(self) -> tuple[str, str]:
        return self.namespace, self.name

    @property
    def held(self) -> bool:
        """Held now, with a margin for the time a write takes."""
        return time.monotonic() < self._valid_until - self.duration / 3

    def free_in(self) -> float:
        """Seconds until the Lease as last seen expires (0: free now)."""
        return LeaseView.of(self._current).free_in(self.identity)

    async def hold(self) -> bool:
        """Take or renew the lease; False when another replica holds it (or a writer raced)."""
        started = time.monotonic()
        if self._current is None or not self.held:
            try:
                self._current = await self.api.get_path(
                    paths.lease(self.namespace, self.name), timeout=self.timeout
                )
            except ApiError as error:
                if error.status != 404:
                    raise
                self._current = None
                return await self._write(None, started)
        if self.free_in() > 0:
            self._valid_until = 0.0
            return False
        return await self._write(self._current, started)

    async def lead(self, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Forever: wait for the Lease, and while holding it run `work` (renewing on a loop of
        its own); `work` is cancelled the moment the Lease is lost. When this is cancelled
        (shutdown), a held Lease is released first."""
        try:
            while True:
                if not await self.hold():
                    await self.wait_until_free()
                    continue
                self.transitions += 1
                log.info("holding Lease %s/%s: this replica does the GPU quota work", *self._where)
                await self._while_held(work)
        finally:
            await self.release()

    async def _while_held(self, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        task = asyncio.get_running_loop().create_task(work())
        try:
            while not task.done():
                await asyncio.wait([task], timeout=self.duration / 3)
                if task.done():
                    break
                try:
                    renewed = await self.hold()
                except ApiError as error:
                    log.warning("renewing Lease %s failed: %s", self.name, error)
                    renewed = self.held  # within its margin, the next try may still succeed
                if not renewed:
                    log.warning("lost Lease %s/%s: GPU quota work stopped", *self._where)
                    break
            if task.done():
                task.result()  # its failure is the job's (the Supervisor restarts it)
        finally:
            with contextlib.suppress(Exception):  # its failure was raised above, if it was seen
                await stop_task(task)  # (a shutdown's cancel landing now is not lost)

    async def release(self) -> None:
        """Give the Lease up, if held, so that another replica takes it at once."""
        if self._current is None or time.monotonic() >= self._valid_until:
            return
        body = dict(self._current)
        body["spec"] = _spec(self._current) | {
            "holderIdentity": "",
            "leaseDurationSeconds": 1,
            "renewTime": kube_time.micro_stamp(),
        }
        self._valid_until = 0.0
        try:
            async with asyncio.timeout(RELEASE_TIMEOUT):  # (not wait_for: it can lose a cancel)
                await asyncio.shield(self._put(body))
            log.info("released Lease %s/%s", self.namespace, self.name)
        except (ApiError, TimeoutError) as error:
            log.warning("releasing Lease %s failed (%s): it expires instead", self.name, error)

    async def wait_until_free(self) -> None:
        """Until the Lease is released or expires: watched, not asked for again and again."""
        deadline = time.monotonic() + max(self.free_in(), 0.2)
        version = LeaseView.of(self._current).resource_version
        query = [("fieldSelector", f"metadata.name={self.name}")]
        events = self.api.watch_path(paths.leases(self.namespace), query, version, window=60)
        try:
            while (left := deadline - time.monotonic()) > 0:
                try:
                    async with asyncio.timeout(left):  # (not wait_for: it can lose a cancel)
                        event = await anext(events)
                except (TimeoutError, StopAsyncIteration):
                    return
                except ApiError:
                    await asyncio.sleep(min(left, 1.0))
                    return
                lease = event.get("object")
                if event.get("type") in ("ADDED", "MODIFIED") and isinstance(lease, dict):
                    self._current = lease
                    if self.free_in() == 0:
                        return
                    deadline = time.monotonic() + self.free_in()
                elif event.get("type") == "DELETED":
                    self._current = None
                    return
        finally:
            await events.aclose()  # type: ignore[attr-defined]

    async def _write(self, current: JsonObject | None, started: float) -> bool:
        now = kube_time.micro_stamp()
        spec: JsonObject = dict(_spec(current))
        read = LeaseView.of(current)
        if read.holder != self.identity:
            spec["acquireTime"] = now
            spec["leaseTransitions"] = read.transitions + (1 if current else 0)
        spec |= {"holderIdentity": self.identity, "leaseDurationSeconds": self.duration}
        spec["renewTime"] = now
        body: JsonObject = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": spec,
        }
        try:
            if current is None:
                written = await self.api.create_object(
                    paths.leases(self.namespace), body, timeout=self.timeout
                )
            else:
                body["metadata"]["resourceVersion"] = read.resource_version or None
                written = await self._put(body)
        except ApiError as error:
            if error.status == 409:  # another replica wrote it first: read it again next time
                self._current, self._valid_until = None, 0.0
                return False
            raise
        self._current = written if isinstance(written, dict) and written else body
        self._valid_until = started + self.duration
        return True

    async def _put(self, body: JsonObject) -> JsonObject:
        return await self.api.replace_object(
            paths.leases(self.namespace), body, timeout=self.timeout
        )
