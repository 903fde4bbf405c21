"""Durations as kubectl and Go write them (`90s`, `15m`, `1h30m`, `500ms`), days (`2d`), or a
bare number of seconds: what every command-line flag and `serve` setting of seconds accepts."""

from __future__ import annotations

import re

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
FORMS = "90, 90s, 15m, 1h30m or 2d"


def parse_seconds(text: str) -> float:
    """Seconds; ValueError naming the forms for anything else (a sign included: no duration
    here is negative)."""
    text = text.strip()
    if _NUMBER.fullmatch(text):
        return float(text)
    parts = _PART.findall(text)
    if not parts or "".join(number + unit for number, unit in parts) != text:
        raise ValueError(f"{text!r} is not a duration: write it as {FORMS}")
    return sum(float(number) * _SECONDS[unit] for number, unit in parts)
