"""The `hami-dra-webhook` command: subcommands are thin shells over the package's modules."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from hami_dra_webhook import __version__
from hami_dra_webhook.cli import (
    certs_cmd,
    check_cmd,
    convert_cmd,
    dry_run,
    gc_cmd,
    scan_cmd,
    serve,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hami-dra-webhook",
        description="Run HAMi legacy GPU manifests unchanged on Kubernetes DRA.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve.add_parser(commands)
    dry_run.add_parser(commands)
    scan_cmd.add_parser(commands)
    convert_cmd.add_parser(commands)
    check_cmd.add_parser(commands)
    certs_cmd.add_parser(commands)
    gc_cmd.add_parser(commands)
    return parser


def main(
    argv: list[str] | None = None,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.run(args, stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr)
    except BrokenPipeError:  # `hami-dra-webhook dry-run ... | head`
        return 0
    except KeyboardInterrupt:
        return 130
    return code
