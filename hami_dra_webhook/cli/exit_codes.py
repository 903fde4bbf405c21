"""One exit-code table for every command (docs/cli.md "Exit codes" lists it)."""

from __future__ import annotations

OK = 0  # done: everything converted or unchanged, every check passed
ATTENTION = 1  # done, but something needs a look: scan's "attention", check's WARN
# With --exit-code (scan, convert): legacy GPU requests remain, as `kubectl diff` and
# `git diff --exit-code` say "differences" with 1 (a CI gate: 0 only once none remain).
LEGACY_REMAINS = 1
REFUSED = 2  # something would be refused (dry-run, convert, scan), or a check FAILs
UNREADABLE = 3  # input, configuration or cluster could not be read (or a job could not be done)
USAGE = 64  # the command line is wrong (as sysexits' EX_USAGE)


def worst(*codes: int) -> int:
    """The code of a run with several outcomes: the most serious one."""
    order = (OK, ATTENTION, REFUSED, UNREADABLE, USAGE)
    return max(codes, key=order.index, default=OK)
