"""A pod as the admission has read it (`ReadPod`): the fast reader's `FastPod`
(core/review/fast.py), or a decoded pod (`DictPod`, below). The use case and the translation
cache read either the same way, with no test of which it is."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

import orjson

from hami_dra_webhook.core.model.containers import containers
from hami_dra_webhook.core.translate.pod_view import pod_view


class ReadPod(Protocol):
    @property
    def namespace(self) -> Any:
        """metadata.namespace as written (None when absent)."""

    @property
    def generate_name(self) -> Any:
        """metadata.generateName as written (None when absent)."""

    @property
    def container_count(self) -> int:
        """Its init and app containers."""

    def cache_key(self, text_of: Callable[[Any], bytes]) -> bytes | None:
        """The translation cache's key of the pod (`text_of` writes a decoded view); None: it
        is not kept."""

    def view(self) -> Any:
        """`pod_view` of the pod: all the translation reads."""

    def container_resources(self) -> Iterator[Any]:
        """Each container as far as its resources, decoded one at a time as asked."""

    def scheduling_gates(self) -> Any:
        """spec.schedulingGates as written (None when absent): where a gate is added."""


class DictPod:
    """A decoded pod (a dict, or whatever the review held) read as a `ReadPod`."""

    __slots__ = ("_view", "pod")

    def __init__(self, pod: Any) -> None:
        self.pod = pod
        self._view: Any = None

    def _metadata(self, key: str) -> Any:
        metadata = self.pod.get("metadata") if isinstance(self.pod, dict) else None
        return metadata.get(key) if isinstance(metadata, dict) else None

    @property
    def namespace(self) -> Any:
        return self._metadata("namespace")

    @property
    def generate_name(self) -> Any:
        return self._metadata("generateName")

    @property
    def container_count(self) -> int:
        return len(self._containers())

    def _containers(self) -> list[Any]:
        spec = self.pod.get("spec") if isinstance(self.pod, dict) else None
        return [container for _, container in containers(spec)]

    def cache_key(self, text_of: Callable[[Any], bytes]) -> bytes | None:
        try:
            return text_of(self.view())
        except orjson.JSONEncodeError:  # e.g. an integer beyond 64 bits: decide, not keep
            return None

    def view(self) -> Any:
        if self._view is None:
            self._view = pod_view(self.pod)
        return self._view

    def container_resources(self) -> Iterator[Any]:
        return iter(self._containers())

    def scheduling_gates(self) -> Any:
        spec = self.pod.get("spec") if isinstance(self.pod, dict) else None
        return spec.get("schedulingGates") if isinstance(spec, dict) else None
