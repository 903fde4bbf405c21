"""The watch's line reader and its oversized events, chunk by chunk (issue 34, finding 1).

The stream here is a stand-in that hands over chunks as a script says: kube-apiserver's chunk
boundaries cannot be chosen, and a line must be found whole wherever they fall. The real
server's large events are played in test_tenant_objects.py.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from hami_dra_webhook.kube.streams import Oversized, lines
from tests.support.loop import run


class _Chunks:
    """Stands in for aiohttp's StreamReader: `iter_any` yields the given chunks."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def iter_any(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


def _read(chunks: list[bytes], limit: int) -> list[Any]:
    async def collect() -> list[Any]:
        return [line async for line in lines(_Chunks(chunks), limit)]  # type: ignore[arg-type]

    return run(collect())


def _event(name: str, namespace: str, padding: int = 0) -> bytes:
    metadata = {
        "name": name,
        "generateName": "x-",
        "namespace": namespace,
        "uid": "u-1",
        "annotations": {"pad": "&" * padding},
    }
    body = {"type": "MODIFIED", "object": {"kind": "PartialObjectMetadata", "metadata": metadata}}
    return json.dumps(body, separators=(",", ":")).encode()


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 10_000])
def test_lines_are_found_whole_wherever_chunks_split_them(size: int) -> None:
    stream = _event("a", "ns") + b"\n" + _event("b", "ns") + b"\n" + _event("c", "ns")
    chunks = [stream[i : i + size] for i in range(0, len(stream), size)]
    lines = _read(chunks, 1 << 20)
    assert [json.loads(line)["object"]["metadata"]["name"] for line in lines] == ["a", "b", "c"]


@pytest.mark.parametrize("size", [5, 4096, 1 << 20])
def test_a_line_past_the_bound_is_skipped_and_named_the_rest_kept(size: int) -> None:
    big = _event("hami-gpu-squat", "tenant-a", padding=300_000)
    stream = _event("before", "ns") + b"\n" + big + b"\n" + _event("after", "ns") + b"\n"
    chunks = [stream[i : i + size] for i in range(0, len(stream), size)]
    lines = _read(chunks, 100_000)
    assert json.loads(lines[0])["object"]["metadata"]["name"] == "before"
    assert isinstance(lines[1], Oversized) and lines[1].size == len(big)
    assert lines[1].event() == {
        "type": "OVERSIZED",
        "size": len(big),
        "namespace": "tenant-a",
        "name": "hami-gpu-squat",
    }
    assert json.loads(lines[2])["object"]["metadata"]["name"] == "after"
    assert len(lines) == 3


def test_an_oversized_event_without_a_readable_name_names_nothing() -> None:
    head = b'{"type":"MODIFIED","object":{"metadata":{"annotations":{"pad":"' + b"&" * 5000
    assert Oversized(head[:4096], 9_000_000).event()["name"] == ""
