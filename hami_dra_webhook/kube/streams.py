"""Reading the API's answers within bounds (issue 34: objects that tenants write are hostile
input): a body read up to a size, and a watch stream's events one line at a time, a line over
the bound skipped and reported by its head."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.kube.port import AnswerTooLarge

# The ListMeta that kube-apiserver writes before a list's items: the continue token of a page
# whose items are too large to read is found here, so that the list goes on past them.
_CONTINUE = re.compile(rb'"continue":"([^"\\]*)"')
# The name and namespace that lead a watch event's object metadata, for a skipped event.
_NAMED = re.compile(
    rb'"metadata":\{"name":"([^"\\]{1,253})"(?:,"[a-zA-Z]+":"[^"\\]*")*?,"namespace":"([^"\\]{1,63})"'
)


def json_or_empty(data: bytes) -> Any:
    """The answer decoded ({} for nothing or not JSON): by orjson, three to four times faster
    than json on a list of pods (benchmarks/fleet.py), and by json where orjson refuses what
    json reads (an integer over 64 bits, a lone surrogate)."""
    if not data:
        return {}
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(data)
    except ValueError:
        return {}


def lean_items(items: object) -> list[Any]:
    """A list page's items, each without `metadata.managedFields`: read by nobody here, and a
    third of a pod as served (a thousand nodes' pods are many)."""
    if not isinstance(items, list):
        return []
    for item in items:
        metadata = item.get("metadata") if isinstance(item, dict) else None
        if isinstance(metadata, dict):
            metadata.pop("managedFields", None)
    return items


async def read_capped(
    response: aiohttp.ClientResponse,
    max_bytes: int,
    close: Callable[[aiohttp.ClientResponse], None] = aiohttp.ClientResponse.close,
) -> bytes:
    """The body, or AnswerTooLarge as soon as it passes `max_bytes` (the connection is closed:
    the rest is never read). The error keeps a list page's continue token, which kube-apiserver
    writes before the items."""
    declared = response.content_length
    body = bytearray()
    if declared is None or declared <= max_bytes:
        async for chunk in response.content.iter_any():
            body += chunk
            if len(body) > max_bytes:
                break
        else:
            return bytes(body)
    else:
        body += await response.content.read(4096)
    close(response)
    found = _CONTINUE.search(body, 0, 4096)
    token = found.group(1).decode("ascii", "replace") if found else ""
    raise AnswerTooLarge(max(len(body), declared or 0), max_bytes, token)


@dataclass(frozen=True)
class Oversized:
    """A watch event larger than the bound: what its head says of the object."""

    head: bytes
    size: int

    def event(self) -> JsonObject:
        """`{"type": "OVERSIZED", "size": ..., "namespace": ..., "name": ...}` (the name and
        namespace empty when the head does not say them)."""
        found = _NAMED.search(self.head)
        name, namespace = (
            (found.group(1).decode("utf-8", "replace"), found.group(2).decode("utf-8", "replace"))
            if found
            else ("", "")
        )
        return {"type": "OVERSIZED", "size": self.size, "namespace": namespace, "name": name}


async def lines(content: aiohttp.StreamReader, max_bytes: int) -> AsyncIterator[bytes | Oversized]:
    """The stream's newline-ended lines; a line longer than `max_bytes` is not kept: its first
    4 KiB and its length come as Oversized, the rest is read and dropped (memory stays within
    `max_bytes` plus one chunk whatever the server sends)."""
    buffer = bytearray()
    skipping: Oversized | None = None
    skipped = 0
    async for chunk in content.iter_any():
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if skipping is not None:
                skipped += len(piece)
            else:
                buffer += piece
                if len(buffer) > max_bytes:
                    skipping, skipped = Oversized(bytes(buffer[:4096]), 0), len(buffer)
                    buffer.clear()
            if end < 0:
                break
            if skipping is not None:
                yield Oversized(skipping.head, skipped)
                skipping = None
            elif buffer:
                yield bytes(buffer)
                buffer.clear()
            start = end + 1
    if buffer and skipping is None:
        yield bytes(buffer)
