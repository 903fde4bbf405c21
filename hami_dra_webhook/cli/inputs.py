"""What every command reads: manifest inputs as kubectl takes them (positional paths and
`-f/--filename`, repeatable, `-` for stdin) and the device-config policy."""

from __future__ import annotations

import argparse
from typing import TextIO

from hami_dra_webhook.core.policy import Policy
from hami_dra_webhook.files.policy_file import read_policy

EXIT_CODES = (
    "Exit codes: 0 done, 1 needs attention, 2 something would be refused, 3 unreadable input,"
    " 64 usage."
)


def add_inputs(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH", help=f"{what}; - = stdin")
    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        default=[],
        dest="filenames",
        metavar="PATH",
        help="the same, as kubectl takes it (repeatable)",
    )


def inputs(args: argparse.Namespace) -> list[str]:
    """Every path named, positional first, in order."""
    return [*args.paths, *args.filenames]


def load_policy(path: str | None, stderr: TextIO) -> Policy:
    """The policy for a command; its file's warning goes to stderr."""
    loaded = read_policy(path)
    if loaded.warning:
        stderr.write(f"warning: {path}: {loaded.warning}\n")
    return loaded.policy


def table(headers: list[str], rows: list[list[str]]) -> list[str]:
    """Columns aligned as kubectl aligns them: upper-case headers, two spaces between."""
    widths = [max(len(str(x)) for x in column) for column in zip(headers, *rows, strict=True)]
    return [
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [headers, *rows]
    ]
