"""The connection guard's rules for answers left unread and pipelined requests (second
hostile-callers issue, findings 1 and 2), with a clock of the test's own and connections that
only record what happens to them. The attacks themselves, against the real process, are in
test_hostile_pipelines.py."""

from __future__ import annotations

from dataclasses import dataclass

from hami_dra_webhook.server.connections import ConnectionGuard, ConnectionLimits


@dataclass(eq=False)
class Connection:
    unsent: int = 0
    paused: bool = False
    dropped: bool = False
    idle_since: float | None = None

    def drop(self) -> None:
        self.dropped = True

    def unsent_bytes(self) -> int:
        return self.unsent

    def draining(self) -> bool:
        return self.paused or self.unsent > 64 * 1024


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _guard(**limits: float) -> tuple[ConnectionGuard, Clock, list[str]]:
    clock, drops = Clock(), []
    guard = ConnectionGuard(ConnectionLimits(**limits), on_drop=drops.append, clock=clock)  # type: ignore[arg-type]
    return guard, clock, drops


def _proven(guard: ConnectionGuard, count: int, **state: object) -> list[Connection]:
    made = [Connection(**state) for _ in range(count)]  # type: ignore[arg-type]
    for connection in made:
        assert guard.accepted(connection)
        guard.proven_now(connection)
    return made


def test_an_unread_answer_closes_its_connection_after_the_write_timeout() -> None:
    guard, clock, drops = _guard(write_timeout=10.0)
    slow, fast = _proven(guard, 2, unsent=200_000, paused=True)
    guard.writes_paused(slow)
    guard.writes_paused(fast)
    clock.now += 5
    fast.paused, fast.unsent = False, 0  # its peer read meanwhile
    guard.sweep()
    assert list(guard.write_paused) == [slow] and drops == []
    clock.now += 4.9
    guard.writes_paused(slow)  # paused again: the deadline still runs from the first time
    guard.sweep()
    assert not slow.dropped
    clock.now += 0.2
    guard.sweep()
    assert slow.dropped and not fast.dropped and drops == ["write_timeout"]
    assert guard.write_paused == {}


def test_too_many_or_too_much_unread_pushes_the_oldest_out() -> None:
    guard, clock, drops = _guard(max_write_paused=3, max_write_paused_bytes=1_000_000)
    connections = _proven(guard, 5, unsent=100_000, paused=True)
    for connection in connections[:4]:
        clock.now += 1
        guard.writes_paused(connection)
    assert [c.dropped for c in connections] == [True, False, False, False, False]
    assert drops == ["write_paused_pushed_out"]
    connections[4].unsent = 900_000  # together now over the bytes
    guard.writes_paused(connections[4])
    assert [c.dropped for c in connections] == [True, True, True, False, False]
    assert list(guard.write_paused) == connections[3:]


def test_at_the_connection_cap_an_unreading_connection_goes_before_idle_ones() -> None:
    guard, clock, drops = _guard(max_connections=3)
    idle, unread, busy = _proven(guard, 3)
    idle.idle_since = clock.now
    unread.paused = True
    guard.writes_paused(unread)
    newcomer = Connection()
    assert guard.accepted(newcomer)
    assert unread.dropped and not idle.dropped and not busy.dropped
    assert drops == ["write_paused_pushed_out"]


def test_pipelined_requests_are_counted_for_the_whole_server() -> None:
    guard, _, _ = _guard(max_queued=2)
    assert guard.may_queue()
    guard.queued = 2
    assert not guard.may_queue()
