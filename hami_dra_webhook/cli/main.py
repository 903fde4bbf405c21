"""The `hami-dra-webhook` command: subcommands are thin shells over the package's modules."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn, TextIO

from hami_dra_webhook import __version__
from hami_dra_webhook.cli import (
    certs_cmd,
    check_cmd,
    convert_cmd,
    dry_run,
    exit_codes,
    gc_cmd,
    migrate_cmd,
    scan_cmd,
    serve,
)


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors on their own exit code (2 means "would be refused")."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(exit_codes.USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="hami-dra-webhook",
        description="Run HAMi legacy GPU manifests unchanged on Kubernetes DRA.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )
    serve.add_parser(commands)
    dry_run.add_parser(commands)
    scan_cmd.add_parser(commands)
    convert_cmd.add_parser(commands)
    check_cmd.add_parser(commands)
    certs_cmd.add_parser(commands)
    gc_cmd.add_parser(commands)
    migrate_cmd.add_parser(commands)
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
