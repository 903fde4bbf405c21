"""The change a conversion makes, as a unified diff (what `kubectl diff` and `helm diff` show a
reviewer): `convert --diff` per file, `dry-run --diff` per object. Coloured on a terminal
unless NO_COLOR is set (https://no-color.org) or TERM is dumb."""

from __future__ import annotations

import difflib
import os
from typing import Any, TextIO

_RED, _GREEN, _CYAN, _BOLD, _RESET = "\x1b[31m", "\x1b[32m", "\x1b[36m", "\x1b[1m", "\x1b[0m"


COLOR_CHOICES = ("auto", "always", "never")


def colour_wanted(stream: TextIO, when: str = "auto") -> bool:
    """`--color` as git takes it: always, never, or auto (a terminal, unless NO_COLOR is set or
    TERM is dumb)."""
    if when in ("always", "never"):
        return when == "always"
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def add_color(parser: Any) -> None:
    parser.add_argument(
        "--color",
        choices=COLOR_CHOICES,
        default="auto",
        metavar="WHEN",
        help="colour the diff: auto (on a terminal, unless NO_COLOR is set), always or never",
    )


def unified(before: str, after: str, name: str, colour: bool = False) -> str:
    """The unified diff of two texts named `name` (a/ and b/ as git writes them); "" when they
    are the same. A text without a final newline gets one, so no line reads as changed."""
    if before == after:
        return ""
    old = _lines(before)
    new = _lines(after)
    plain = name.lstrip("/")
    source = f"a/{plain}" if before else "/dev/null"
    target = f"b/{plain}"
    lines = list(difflib.unified_diff(old, new, source, target))
    return "".join(_painted(line) if colour else line for line in lines)


def _lines(text: str) -> list[str]:
    if text and not text.endswith("\n"):
        text += "\n"
    return text.splitlines(keepends=True)


def _painted(line: str) -> str:
    body = line.rstrip("\n")
    end = line[len(body) :]
    if line.startswith(("---", "+++")):
        return f"{_BOLD}{body}{_RESET}{end}"
    if line.startswith("@@"):
        return f"{_CYAN}{body}{_RESET}{end}"
    if line.startswith("+"):
        return f"{_GREEN}{body}{_RESET}{end}"
    if line.startswith("-"):
        return f"{_RED}{body}{_RESET}{end}"
    return line
