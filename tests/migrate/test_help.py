"""Every command's --help ends with examples, and each example is a command line its parser
takes as written (issue 49); a bare command prints its help; an unknown flag is said with the
usage of the command it was given to."""

from __future__ import annotations

import argparse
import io
import shlex

import pytest

from hami_dra_webhook.cli.help_text import EXAMPLES
from hami_dra_webhook.cli.main import build_parser, main


def commands(parser: argparse.ArgumentParser, path: str = "") -> dict[str, argparse.ArgumentParser]:
    found = {path: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if not name.startswith("_"):
                    found |= commands(sub, f"{path} {name}".strip())
    return found


def test_every_command_has_examples_in_its_help() -> None:
    every = commands(build_parser())
    assert set(every) == set(EXAMPLES)
    for path, parser in every.items():
        assert "\nexamples:\n  " in parser.format_help(), path


@pytest.mark.parametrize(
    "line", [line for lines in EXAMPLES.values() for line in lines], ids=lambda line: line[:60]
)
def test_each_example_parses_as_written(line: str) -> None:
    segment = next(part for part in line.split("|") if "hami-dra-webhook " in part)
    segment = segment.replace("source <(", "").replace(")", "").split(">")[0]
    words = shlex.split(segment, comments=True)
    assert words[0] == "hami-dra-webhook"
    args, unknown = build_parser().parse_known_args(words[1:])
    assert unknown == [] and callable(args.run)


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdin=io.StringIO(""), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_a_bare_command_prints_its_help() -> None:
    code, out, _ = run()
    assert code == 0 and out.startswith("usage: hami-dra-webhook [-h]") and "examples:" in out
    code, out, _ = run("migrate")
    assert code == 0 and out.startswith("usage: hami-dra-webhook migrate")


def test_an_unknown_flag_is_said_with_its_commands_usage() -> None:
    code, _, err = run("scan", "--bogus")
    assert code == 64
    assert err.startswith("usage: hami-dra-webhook scan [-h]")
    assert err.rstrip().endswith("hami-dra-webhook scan: error: unrecognized arguments: --bogus")
    code, _, err = run("migrate", "node", "n1", "--to", "dra", "--nope")
    assert code == 64 and err.startswith("usage: hami-dra-webhook migrate node")
