"""What the commands print is anyone's text: names, labels, images and messages from manifests
and from the cluster, which a tenant writes. A terminal runs the control characters among them
(an escape sequence can rewrite lines, retitle the window or hide text), so every command writes
through `Printable`, which shows them as `\\x1b`-style escapes instead; only the project's own
sequences (colour in a diff, the scan's progress line) go to the stream underneath (`raw`).
Newlines, tabs and carriage returns pass: YAML and JSON written here never hold another raw
control character, so no data output changes."""

from __future__ import annotations

from typing import Any, TextIO, cast

_KEPT = {"\n", "\t", "\r"}
_ESCAPED = {
    code: f"\\x{code:02x}"
    for code in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0))
    if chr(code) not in _KEPT
}


def printable(text: str) -> str:
    """`text` with every control character but newline, tab and carriage return escaped."""
    return text.translate(_ESCAPED)


class Printable:
    """A text stream that writes `printable(text)` to the one it wraps (`raw`)."""

    def __init__(self, raw: TextIO) -> None:
        self.raw = raw

    def write(self, text: str) -> int:
        self.raw.write(printable(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, encoding, fileno, ...
        return getattr(self.raw, name)


def raw(stream: TextIO) -> TextIO:
    """The stream underneath a Printable (the stream itself otherwise): for the project's own
    control sequences."""
    return stream.raw if isinstance(stream, Printable) else stream


def printing(stream: TextIO) -> TextIO:
    """`stream` wrapped in a Printable (once)."""
    return stream if isinstance(stream, Printable) else cast(TextIO, Printable(stream))
