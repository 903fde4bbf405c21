"""The GPU quota work's own parts in process, in milliseconds, with no API (issue 62): the queue
of namespaces and the watched view of the ResourceQuotas. What they do against a real
kube-apiserver is tests/cluster/test_quota_pass_tenants.py and test_lease.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from hami_dra_webhook.cluster.quota.namespace_queue import NamespaceQueue
from hami_dra_webhook.cluster.quota.view import QuotaView
from hami_dra_webhook.core.quota.gpu_quota import quota_keys
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from hami_dra_webhook.kube.port import ApiError
from tests.support.loop import run


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_namespace_is_queued_once_and_never_in_two_turns() -> None:
    async def scenario() -> None:
        clock = Clock()
        queue = NamespaceQueue(gap=1.0, clock=clock)
        for _ in range(3):
            queue.add("a")
        assert len(queue) == 1
        assert await queue.take() == "a"
        queue.add("a")  # while its turn runs: one more turn after it
        assert len(queue) == 1
        waiting = asyncio.ensure_future(queue.take())
        await asyncio.sleep(0.01)
        assert not waiting.done()  # not while the first turn runs
        queue.done("a", 0.1)
        await asyncio.sleep(0.01)
        assert not waiting.done()  # nor within `gap` of its end
        clock.now += 1.0
        queue.add("b")  # anything added wakes the takers
        assert await asyncio.wait_for(waiting, 1) in ("a", "b")

    run(scenario())


def test_the_cheapest_namespace_goes_first() -> None:
    async def scenario() -> list[str]:
        clock = Clock()
        queue = NamespaceQueue(gap=0.0, clock=clock)
        for name, seconds in (("big", 2.0), ("small", 0.01), ("new", 0.0)):
            queue.add(name)
            assert await queue.take() == name
            queue.done(name, seconds)
        for name in ("big", "small", "new"):
            queue.add(name)
        return [await queue.take() for _ in range(3)]

    assert run(scenario()) == ["new", "small", "big"]


def _quota(namespace: str, name: str, hard: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name}, "spec": {"hard": hard}}


def test_the_view_keeps_the_kept_limits_and_says_which_namespace_changed() -> None:
    view = QuotaView(Unanswered(), quota_keys(DEFAULT_POLICY))  # type: ignore[arg-type]
    changed: list[str] = []
    view.tell(changed.append)
    view._listed(
        [
            _quota("a", "gpu", {"limits.nvidia.com/gpumem": "8000"}),
            _quota("b", "pods", {"pods": "10"}),  # no kept key: not a GPU quota namespace
        ]
    )
    assert set(view.limits) == {"a"} and changed == ["a"]
    view._event("ADDED", _quota("a", "more", {"requests.nvidia.com/gpu": "2"}))
    assert [limit.key for limit in view.limits["a"]] == [
        "limits.nvidia.com/gpumem",
        "requests.nvidia.com/gpu",
    ]
    view._event("MODIFIED", _quota("b", "pods", {"pods": "20"}))
    assert changed == ["a", "a"]  # b is still no GPU quota namespace: nothing to tell
    view._event("DELETED", _quota("a", "gpu", {}))
    view._event("DELETED", _quota("a", "more", {}))
    assert view.limits == {} and changed == ["a", "a", "a", "a"]
    assert run(view.holds("a")) is True  # the read fails: held


class Unanswered:
    """An API that never answers (a stand-in: the view's reads fail)."""

    async def list_path(self, *args: Any, **options: Any) -> Any:
        raise ApiError(0, "Unreachable", "no API here")


@pytest.mark.parametrize("turns_between", [0, 1, 2, 3])
def test_a_worker_whose_cancel_is_accepted_takes_no_namespace(turns_between: int) -> None:
    """The Lease lost (the worker cancelled) just as a namespace is queued: a cancel the worker
    accepted must end it, not let it take the namespace. On Python 3.11 `asyncio.wait_for`
    loses a cancellation that lands as its wait ends (gh-86296): the worker took the namespace
    (and would have released its pods without the Lease). The queue waits with
    `asyncio.timeout`; each ordering of the add and the cancel is tried."""

    async def scenario() -> tuple[bool, str]:
        queue = NamespaceQueue(gap=60.0, clock=Clock())
        queue.add("a")
        assert await queue.take() == "a"
        queue.done("a", 0.1)
        queue.add("a")  # pending, due in a minute: the worker waits with a timeout
        worker = asyncio.create_task(queue.take())
        await asyncio.sleep(0.01)
        queue.add("team")  # due now: the wait ends
        for _ in range(turns_between):
            await asyncio.sleep(0)
        accepted = worker.cancel()
        try:
            return accepted, f"took {await worker}"
        except asyncio.CancelledError:
            return accepted, "cancelled"

    accepted, outcome = run(scenario())
    assert outcome == ("cancelled" if accepted else "took team"), (accepted, outcome)
