"""Manifest inputs as kubectl takes them: positional paths and `-f/--filename` (repeatable),
`-` for stdin."""

from __future__ import annotations

import argparse

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
