"""A cancellation that lands while a task waits for the task it has just cancelled is not lost
(cluster/tasks.py `stop_task`): found when the GPU quota Lease's holder, cancelled (a shutdown)
the moment its lost Lease's work had ended, went on leading and waited for the intruder's
hour-long Lease instead of ending (tests/cluster/test_lease.py hung, the shared plane starved
of CPU). In process: the cancel is made to land at exactly that moment, from the cancelled
task's own end."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from hami_dra_webhook.cluster.quota.lease import Lease
from hami_dra_webhook.cluster.tasks import stop_task
from hami_dra_webhook.kube.port import paths
from tests.support.loop import run
from tests.support.memory_api import MemoryApi


async def _swallowing_stop(task: asyncio.Task[None]) -> None:
    """What lease.py and kept_lists.py did before: the cancel of the waiter is lost."""
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


@pytest.mark.parametrize("stop", [stop_task, _swallowing_stop], ids=["stop_task", "suppress"])
def test_a_cancel_landing_as_the_stopped_task_ends_reaches_the_waiter(stop) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> str:
        inner = asyncio.create_task(asyncio.sleep(3600))
        waiter: asyncio.Task[str] | None = None

        async def stopping() -> str:
            await stop(inner)
            return "went on"

        waiter = asyncio.create_task(stopping())
        # The waiter's cancel, at the inner task's end: before the waiter wakes from it.
        inner.add_done_callback(lambda _: waiter.cancel())
        try:
            return await waiter
        except asyncio.CancelledError:
            return "cancelled"

    ended = run(scenario())
    if stop is stop_task:
        assert ended == "cancelled"
    else:
        assert ended == "went on"  # the defect this guards against, shown on the old way


def test_the_stopped_tasks_own_cancel_and_failure_are_told_apart() -> None:
    async def fails() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            raise ValueError("its own failure")

    async def scenario() -> None:
        await stop_task(asyncio.create_task(asyncio.sleep(3600)))  # its cancel: the end expected
        failing = asyncio.create_task(fails())
        await asyncio.sleep(0)  # it starts (a task cancelled before its start runs nothing)
        with pytest.raises(ValueError, match="its own failure"):
            await stop_task(failing)

    run(scenario())


def test_a_lease_holder_cancelled_as_its_lost_work_ends_stops_leading() -> None:
    """The holder sees another's write (its renewal fails), cancels its work; a shutdown's
    cancel lands the moment that work has ended. It must end (releasing nothing it does not
    hold), not lead on and wait for the other's hour-long Lease."""
    api = MemoryApi()
    api.namespaces("hami-system")
    holder = Lease(api, "hami-system", "gpu-quota", "a", duration=3)  # type: ignore[arg-type]

    async def scenario() -> float:
        leading: asyncio.Task[None] | None = None
        started = asyncio.Event()

        async def work() -> None:
            started.set()
            try:
                await asyncio.sleep(3600)
            finally:  # queued before the holder wakes from this work's end
                assert leading is not None
                asyncio.get_running_loop().call_soon(leading.cancel)

        leading = asyncio.create_task(holder.lead(work))
        await started.wait()
        current = await api.get_path(paths.lease("hami-system", "gpu-quota"), timeout=5)
        current["spec"] |= {"holderIdentity": "intruder", "leaseDurationSeconds": 3600}
        await api.replace_object(paths.leases("hami-system"), current, timeout=5)
        begun = time.monotonic()
        with contextlib.suppress(asyncio.CancelledError):
            async with asyncio.timeout(10):  # the renewal fails within 1 s (a third of 3 s)
                await leading
        return time.monotonic() - begun

    took = run(scenario())
    assert took < 5, f"the holder ended {took:.1f} s after the intruder's write"
