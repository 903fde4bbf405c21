"""Which lines of a file `convert` changed that it had no reason to change.

A converted document may lose the lines of the legacy resources it strips (and the `limits:`,
`requests:` or `resources:` line left with nothing under it, with the comments inside what goes),
may have text inserted into a line (a key added to a flow map such as `labels: {app: a}`), may
lose a scheduler it replaces, and may gain lines. Every other line must come out byte for byte.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

# A resource name of a device family (`nvidia.com/gpumem`, `huawei.com/Ascend910B-memory`,
# `hygon.com/dcunum`): the lines a conversion strips.
_DEVICE_KEY = re.compile(r"""["']?[a-z0-9][-a-z0-9.]*\.(?:com|cn|io|ai)/[-A-Za-z0-9_.]+["']?\s*:""")
_HEADER = re.compile(r"""^\s*(?:-\s+)?["']?(limits|requests|resources|schedulerName)["']?\s*:""")


@dataclass(frozen=True)
class Unexpected:
    line: int  # 1-based, in the original
    old: str
    new: str | None  # None: removed

    def __str__(self) -> str:
        if self.new is None:
            return f"line {self.line} removed: {self.old!r}"
        return f"line {self.line} changed: {self.old!r} -> {self.new!r}"


def _device_line(line: str) -> bool:
    return bool(_DEVICE_KEY.search(line)) and "hami.io/" not in line.split(":", 1)[0]


def _stripped_line(line: str) -> bool:
    return _device_line(line) or bool(_HEADER.match(line))


def _said_nothing(line: str) -> bool:
    return not line.strip() or line.lstrip().startswith("#")


def _inserted_only(old: str, new: str) -> bool:
    """`new` is `old` with text put in at one place (a flow entry added)."""
    if len(new) <= len(old):
        return False
    prefix = 0
    while prefix < len(old) and old[prefix] == new[prefix]:
        prefix += 1
    return new.endswith(old[prefix:])


def unexpected_changes(original: str, converted: str) -> list[Unexpected]:
    """The original's lines that `converted` removes or changes without a reason."""
    old_lines = original.splitlines(keepends=True)
    new_lines = converted.splitlines(keepends=True)
    # Without the junk heuristic: blank and `---` lines must be matched as they are.
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    found: list[Unexpected] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in {"equal", "insert"}:
            continue
        olds, news = old_lines[i1:i2], new_lines[j1:j2]
        # Lines removed, or changed by text put in; the comments and blank lines among a
        # stripped resource's lines go with it.
        stripping = any(_device_line(old) for old in olds)
        for offset, old in enumerate(olds):
            if _stripped_line(old) or (stripping and _said_nothing(old)):
                continue
            paired = news[offset] if tag == "replace" and len(olds) == len(news) else None
            if paired is not None and _inserted_only(old, paired):
                continue
            if paired is None and any(_inserted_only(old, new) for new in news):
                continue
            found.append(Unexpected(i1 + offset + 1, old, paired))
    return found
