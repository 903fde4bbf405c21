"""Decisions already made: pods of one ReplicaSet are identical in everything the translation
reads, so the second and later ones need no translation at all.

The key is the pod's view (`core.translate.pod_view`: exactly what the translation reads),
serialized, with the namespace; the policy in use owns the cache (a new policy empties it). Bounded
in bytes (keys and decisions, as Python holds them), least recently used first out; an entry
bigger than `max_entry_bytes` is not kept, so no request can fill it with one pod. The default,
8 MiB, holds about 320 decisions for the benchmark's pods (40 environment variables each) and
thousands for small pods: far more distinct pod templates than a cluster creates at once.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import orjson

from hami_dra_webhook.core.outcome.decision import Converted, Decision, Refusal
from hami_dra_webhook.core.review.read_pod import DictPod, ReadPod
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.translate.pod import translate_pod

Key = tuple[str | None, bytes]


class TranslationCache:
    def __init__(
        self, max_bytes: int = 8 << 20, max_entry_bytes: int = 256 << 10, from_yaml: bool = False
    ) -> None:
        """`from_yaml`: pods read from YAML, keyed by Python's text of their view, which tells
        apart what YAML reads and JSON cannot write (a date and its text, an infinity and null,
        -0.0 and 0.0); the webhook's come from JSON, keyed by its JSON."""
        self.max_bytes, self.max_entry_bytes = max_bytes, max_entry_bytes
        self._text_of: Callable[[Any], bytes] = _python_text if from_yaml else orjson.dumps
        self._entries: OrderedDict[Key, tuple[Decision, int]] = OrderedDict()
        self._policy: Policy | None = None
        self.bytes = 0
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def decide(self, pod: Any, policy: Policy, namespace: str | None) -> Decision:
        """What `translate_pod(pod, policy, namespace)` decides for a decoded pod, from the
        cache when known."""
        return self.decide_read(DictPod(pod), policy, namespace)

    def decide_read(self, pod: ReadPod, policy: Policy, namespace: str | None) -> Decision:
        """As `decide`, for a pod as the admission read it (a `FastPod` brings its own key, the
        text of what is read, and is decoded only when it is not known)."""
        if policy is not self._policy:
            self._entries.clear()
            self.bytes = 0
            self._policy = policy
        text = pod.cache_key(self._text_of)
        if text is None:
            return translate_pod(pod.view(), policy, namespace)
        key = (namespace, text)
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
            self.hits += 1
            return found[0]
        self.misses += 1
        decision = translate_pod(pod.view(), policy, namespace)
        size = len(namespace or "") + len(key[1]) * PYTHON_OVER_JSON + _size(decision)
        if size <= self.max_entry_bytes:
            self._entries[key] = (decision, size)
            self.bytes += size
            while self.bytes > self.max_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self.bytes -= dropped
        return decision


def _python_text(view: Any) -> bytes:
    return repr(view).encode()


# Python objects take about three times the bytes of their JSON (measured with tracemalloc:
# 2.8 for the benchmark's decisions).
PYTHON_OVER_JSON = 3


def _size(decision: Decision) -> int:
    """About what a decision holds in memory, in bytes."""
    size = sum(len(w) for w in decision.warnings) + 256
    if isinstance(decision, Converted):
        size += len(orjson.dumps(decision.patch)) + len(orjson.dumps(decision.templates))
    elif isinstance(decision, Refusal):
        size += len(decision.message)
    return size * PYTHON_OVER_JSON
