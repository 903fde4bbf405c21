"""How many API confirmations a namespace may cause: a token bucket per namespace, bounded in
the namespaces it remembers (no caller can grow it)."""

from __future__ import annotations

from dataclasses import dataclass

MAX_NAMESPACE_BUCKETS = 4096


@dataclass
class _Bucket:
    tokens: float
    at: float


class NamespaceRate:
    """A token bucket per namespace: `burst` API confirmations at once, `per_second` after.
    At most MAX_NAMESPACE_BUCKETS namespaces are remembered (a full bucket is forgotten first,
    since forgetting it changes nothing)."""

    def __init__(self, per_second: float, burst: float) -> None:
        self.per_second, self.burst = per_second, burst
        self._buckets: dict[str, _Bucket] = {}

    def take(self, namespace: str, count: int, now: float) -> bool:
        bucket = self._buckets.pop(namespace, None)
        if bucket is None:
            if len(self._buckets) >= MAX_NAMESPACE_BUCKETS:
                self._forget_one(now)
            bucket = _Bucket(self.burst, now)
        bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.at) * self.per_second)
        bucket.at = now
        self._buckets[namespace] = bucket  # the most recently used last
        if bucket.tokens < count:
            return False
        bucket.tokens -= count
        return True

    def _forget_one(self, now: float) -> None:
        for name, bucket in self._buckets.items():
            if bucket.tokens + (now - bucket.at) * self.per_second >= self.burst:
                del self._buckets[name]
                return
        del self._buckets[next(iter(self._buckets))]
