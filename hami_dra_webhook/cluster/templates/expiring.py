"""A bounded map whose entries expire: what the template store has confirmed and may use
without asking the API until `expires`. Expired entries are pruned when the map has doubled
since the last pruning (so a prune costs O(1) an insertion on average), and past
`max_entries` the oldest go first."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

K = TypeVar("K")


class Expires(Protocol):
    @property
    def expires(self) -> float: ...


V = TypeVar("V", bound=Expires)


class HasMonotonic(Protocol):
    @property
    def monotonic(self) -> Callable[[], float]: ...


class Expiring(Generic[K, V]):
    def __init__(self, max_entries: int, clocks: HasMonotonic) -> None:
        self._entries: dict[K, V] = {}
        self._max, self._clocks = max_entries, clocks
        self._prune_at = min(1024, max_entries)

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        """The entry, expired or not (the caller compares `expires` with its own now)."""
        return self._entries.get(key)

    def put(self, key: K, value: V) -> None:
        self._entries.pop(key, None)  # re-inserted: the newest entry comes last
        self._entries[key] = value
        if len(self._entries) >= self._prune_at:
            now = self._clocks.monotonic()
            self._entries = {k: e for k, e in self._entries.items() if e.expires > now}
            while len(self._entries) >= self._max:  # the oldest first
                del self._entries[next(iter(self._entries))]
            floor = min(1024, self._max)
            self._prune_at = min(self._max, max(floor, 2 * len(self._entries)))

    def pop(self, key: K) -> V | None:
        return self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()
