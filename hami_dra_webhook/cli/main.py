"""The `hami-dra-webhook` command: subcommands are thin shells over the package's modules."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
from typing import NoReturn, TextIO

from hami_dra_webhook import __version__
from hami_dra_webhook.cli import completion, exit_codes, help_text
from hami_dra_webhook.cli.terminal import printing

PROGRAM = "hami-dra-webhook"
KUBECTL_PLUGIN = "kubectl hami"  # the `kubectl-hami` entry point: `kubectl hami scan ...`
# The commands' modules, in the help's order. Each is imported when its parser is built: the
# node monitor (a DaemonSet on every GPU node) loads only its own (issue 63: 8 MiB less).
COMMANDS = (
    "serve", "dry_run", "scan_cmd", "convert_cmd", "check_cmd", "certs_cmd", "gc_cmd",
    "migrate_cmd", "monitor_cmd", "version_cmd", "completion",
)  # fmt: skip
ALONE = {"monitor": "monitor_cmd"}  # a command whose process needs no other command's modules


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors on their own exit code (2 means "would be refused")."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(exit_codes.USAGE, f"{self.prog}: error: {message}\n")


def build_parser(prog: str = PROGRAM, only: str | None = None) -> argparse.ArgumentParser:
    """Every command's parser; `only`: the one module's (its help and arguments as in full)."""
    parser = _Parser(
        prog=prog,
        description="Run HAMi legacy GPU manifests unchanged on Kubernetes DRA.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.set_defaults(prog_name=prog)
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )
    for name in (only,) if only else COMMANDS:
        importlib.import_module(f"hami_dra_webhook.cli.{name}").add_parser(commands)
    help_text.finish(parser, prog=prog)
    return parser


def main(
    argv: list[str] | None = None,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    prog: str = PROGRAM,
) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in ([completion.COMPLETE_COMMAND], [completion.COMPLETE_NO_DESCRIPTIONS]):
        described = argv[0] == completion.COMPLETE_COMMAND
        return completion.run_complete(
            build_parser(prog), argv[1:], stdout or sys.stdout, described
        )
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    try:  # usage errors, --help and --version go where the caller's streams go
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            only = ALONE.get(argv[0]) if argv else None
            args, unknown = build_parser(prog, only).parse_known_args(argv)
            if unknown:  # said with the usage of the command they were given to
                args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else exit_codes.USAGE
    out, err = printing(stdout), printing(stderr)  # cli/terminal.py: anyone's text
    try:
        code: int = args.run(args, stdin or sys.stdin, out, err)
    except BrokenPipeError:  # `hami-dra-webhook dry-run ... | head`
        return 0
    except KeyboardInterrupt:
        return 130
    return code


# kubectl's own flags that a user writes before the command (`kubectl hami -n team-a scan`):
# moved after it, where the command's parser reads them.
_KUBECTL_FLAGS = ("-n", "--namespace", "--context", "--kubeconfig")
_KUBECTL_SWITCHES = ("-A", "--all-namespaces")


def kubectl_order(argv: list[str]) -> list[str]:
    """`-n x scan ...` as `scan ... -n x`: kubectl's flags before the command go after it."""
    moved: list[str] = []
    rest = list(argv)
    while rest and rest[0].startswith("-"):
        word = rest[0]
        if word in _KUBECTL_FLAGS and len(rest) > 1:
            moved += rest[:2]
            rest = rest[2:]
        elif word in _KUBECTL_SWITCHES or word.split("=", 1)[0] in _KUBECTL_FLAGS[1:]:
            moved.append(word)
            rest = rest[1:]
        else:
            break
    return [*rest, *moved] if rest else argv


def kubectl_plugin() -> int:
    """`kubectl-hami` on PATH: kubectl runs it for `kubectl hami ...` (kubectl's flags may come
    before the command, as kubectl users write them)."""
    return main(kubectl_order(sys.argv[1:]), prog=KUBECTL_PLUGIN)


def kubectl_plugin_completion() -> int:
    """`kubectl_complete-hami` on PATH: kubectl (1.26+) runs it for `kubectl hami <TAB>` with
    the words after `hami`, and reads cobra's format, which `__complete` writes."""
    return completion.run_complete(build_parser(KUBECTL_PLUGIN), sys.argv[1:], sys.stdout)
