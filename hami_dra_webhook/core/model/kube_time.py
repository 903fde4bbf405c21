"""Kubernetes times, written and read in one place: metav1.Time (RFC 3339 in UTC, whole
seconds, `Z`: creationTimestamp, Events, annotations) and metav1.MicroTime (microseconds: a
Lease's renewTime). What is read is anything's text (a tenant may write an annotation), so it
is bounded and a time that is not one reads as None."""

from __future__ import annotations

import time
from datetime import UTC, datetime

SECONDS_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
MICRO_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
LONGEST = 40  # "2026-12-07T19:10:55.123456789+00:00" is 35; anything longer is not a time


def stamp(seconds: float | None = None) -> str:
    """metav1.Time of `seconds` since the epoch (now when None)."""
    return _utc(seconds).strftime(SECONDS_FORMAT)


def micro_stamp(seconds: float | None = None) -> str:
    """metav1.MicroTime of `seconds` since the epoch (now when None)."""
    return _utc(seconds).strftime(MICRO_FORMAT)


def seconds_of(text: object) -> float | None:
    """Seconds since the epoch of an RFC 3339 time as kube-apiserver writes them (`Z` or an
    offset, with or without a fraction); None when `text` is not one (a time without a zone
    included: Kubernetes never writes one)."""
    if not isinstance(text, str) or not 20 <= len(text) <= LONGEST or text[10:11] != "T":
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return when.timestamp()


def age(text: object, now: float | None = None) -> float | None:
    """Seconds from the time `text` says until `now` (the clock when None); None: no time."""
    seconds = seconds_of(text)
    return None if seconds is None else (time.time() if now is None else now) - seconds


def _utc(seconds: float | None) -> datetime:
    return datetime.now(UTC) if seconds is None else datetime.fromtimestamp(seconds, UTC)
