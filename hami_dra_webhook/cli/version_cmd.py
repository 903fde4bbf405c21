"""`hami-dra-webhook version`: the package's version, and what it runs on."""

from __future__ import annotations

import argparse
import platform
from typing import Any, TextIO

from hami_dra_webhook import __version__
from hami_dra_webhook.cli.inputs import add_output, write_data


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "version",
        help="print the version",
        description="Print hami-dra-webhook's version (the chart and image carry the same one).",
    )
    add_output(parser)
    parser.set_defaults(run=run)


def facts() -> dict[str, str]:
    return {
        "version": __version__,
        "python": platform.python_version(),
        "platform": f"{platform.system().lower()}/{platform.machine()}",
    }


def run(args: argparse.Namespace, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    if args.output == "text":
        stdout.write(f"{args.prog_name} {__version__}\n")
    else:
        write_data(facts(), args.output, stdout)
    return 0
