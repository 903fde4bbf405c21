"""`hami-dra-webhook convert`: rewrite manifests into their DRA form, for GitOps sources."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from hami_dra_webhook.cli import exit_codes
from hami_dra_webhook.cli.diff_view import add_color
from hami_dra_webhook.cli.inputs import (
    EMPTY,
    add_exit_code,
    add_inputs,
    add_rules,
    admission_rules,
    exit_codes_help,
    inputs,
)
from hami_dra_webhook.cli.terminal import raw
from hami_dra_webhook.files.manifests import MANIFEST_SUFFIXES, hidden, not_utf8


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "convert",
        help="rewrite manifests: converted workloads plus the ResourceClaimTemplates they need",
        description="Convert legacy HAMi GPU requests in manifest files (YAML keeps comments and"
        " key order); `convert -` reads stdin and writes the result to stdout. Objects that would"
        " be refused are left as they are and reported. Converting twice changes nothing. "
        + exit_codes_help("with --exit-code: a file would change"),
    )
    add_inputs(parser, "manifest files or folders")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--out", type=Path, metavar="DIR", help="write converted copies here")
    target.add_argument("--in-place", action="store_true", help="rewrite the files themselves")
    target.add_argument(
        "--diff",
        action="store_true",
        help="write nothing: print the change to each file as a unified diff (coloured on a"
        " terminal, unless NO_COLOR is set)",
    )
    parser.add_argument(
        "-n", "--namespace", help="namespace for the templates of objects without one"
    )
    parser.add_argument("--config", metavar="FILE", help="HAMi device-config.yaml (policy)")
    add_rules(parser)
    add_exit_code(parser, "a file convert would change")
    add_color(parser)
    parser.add_argument(
        "--embedded",
        action="store_true",
        help="also rewrite pod templates inside custom resources (LeaderWorkerSet, RayCluster,"
        " Volcano Job, ...); by default they are listed and left, the webhook converts their pods",
    )
    parser.set_defaults(run=run)


MAX_LISTED = 10  # workloads named per file in the summary line


WRITTEN_WRONG = (
    "convert could not write this file correctly, so it is left as it is: {error}. This is a"
    " defect of hami-dra-webhook, not of the file: please report it with the file"
)


def _convert_stdin(
    args: argparse.Namespace, policy: Any, stdin: TextIO, stdout: TextIO, stderr: TextIO
) -> int:

    text = stdin.read()
    if not text.strip():
        stderr.write(f"error: <stdin>: {EMPTY}\n")
        return exit_codes.UNREADABLE
    result = _converted(text, "<stdin>", text.lstrip().startswith("{"), args, policy, stderr)
    if result is None:
        return exit_codes.UNREADABLE
    _report(result, "<stdin>", stderr)
    if args.diff:
        from hami_dra_webhook.cli.diff_view import colour_wanted, unified

        raw(stdout).write(unified(text, result.text, "<stdin>", colour_wanted(stdout, args.color)))
    else:
        stdout.write(result.text)
    remains = args.exit_code and result.changed
    return exit_codes.worst(_code(result), exit_codes.LEGACY_REMAINS if remains else exit_codes.OK)


def _code(result: Any) -> int:
    """2 when something would be refused, else 0 (as dry-run: its warnings are on stderr)."""
    return exit_codes.REFUSED if result.refused else exit_codes.OK


@dataclass(frozen=True)
class _Form:
    """What a file's text has that the conversion must give back: CRLF line ends, a BOM."""

    crlf: bool = False
    bom: bool = False

    def restore(self, text: str) -> str:
        if self.crlf:
            text = text.replace("\r\n", "\n").replace("\n", "\r\n")
        return ("\ufeff" if self.bom else "") + text


def _read_text(path: Path) -> tuple[str, _Form]:
    """The file's text with LF line ends and no BOM, and what to give back when writing it.
    A file of mixed line ends is converted as it is (YAML reads either): new lines get LF."""
    with path.open(encoding="utf-8", newline="") as file:
        text = file.read()
    bom = text.startswith("\ufeff")
    text = text.removeprefix("\ufeff")
    crlf = "\r\n" in text and text.count("\r\n") == text.count("\n")
    return (text.replace("\r\n", "\n") if crlf else text), _Form(crlf, bom)


def _report(result: Any, where: object, stderr: TextIO) -> None:
    for line in result.refused:
        stderr.write(f"refused: {where}: {line}\n")
    for line in result.warnings:
        stderr.write(f"warning: {where}: {line}\n")
    for line in result.notes:
        stderr.write(f"info: {where}: {line}\n")


class OutputError(ValueError):
    """Where converted files would go cannot be used; the message says why."""


def _files(paths: list[str], stderr: TextIO) -> list[tuple[Path, Path]]:
    """(file, path under --out) for every manifest file named or found.

    Outputs keep their layout relative to the deepest folder that holds everything named: one
    folder maps onto --out itself, `A/x.yaml B/x.yaml` onto `--out/A/x.yaml` and `--out/B/x.yaml`.
    A symbolic link found in a folder is not followed (it may lead out of the tree, and writing
    it would write the file it points to): it is skipped, and said.
    """
    found: list[tuple[Path, Path]] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            for p in sorted(path.rglob("*")):
                if p.suffix not in MANIFEST_SUFFIXES or hidden(p, path):
                    continue
                if p.is_symlink():
                    stderr.write(f"skipped: {p}: a symbolic link (convert what it points to)\n")
                elif p.is_file():
                    found.append((p, p))
        elif path.is_file():
            found.append((path, path))
        else:
            raise FileNotFoundError(f"{path}: no such file or folder")
    roots = [os.path.abspath(n if Path(n).is_dir() else Path(n).parent) for n in paths]
    common = Path(os.path.commonpath(roots)) if roots else Path.cwd()
    return [(path, Path(os.path.abspath(full)).relative_to(common)) for path, full in found]


def _targets(files: list[tuple[Path, Path]], out: Path) -> dict[Path, Path]:
    """file -> where its converted copy goes; refuses collisions and overwriting an input."""
    if out.exists() and not out.is_dir():
        raise OutputError(f"--out {out} is a file; give a folder (or use --in-place)")
    inputs = {path.resolve() for path, _ in files}
    targets: dict[Path, Path] = {}
    written: dict[Path, Path] = {}
    for path, relative in files:
        target = out / relative
        resolved = target.resolve()
        if resolved in inputs:
            raise OutputError(
                f"--out {out} would overwrite the input {path}; write elsewhere or use --in-place"
            )
        if resolved in written:
            raise OutputError(f"{written[resolved]} and {path} would both be written to {target}")
        written[resolved] = path
        targets[path] = target
    return targets


def _write(target: Path, out: Path | None, text: str) -> None:
    """Write `target` (under `out`, or in place), never through a symbolic link: not the file,
    nor a folder between `out` and it (a link planted there would send the write anywhere)."""
    top = Path(os.path.abspath(out)) if out is not None else None
    here = Path(os.path.abspath(target))
    for step in (here, *here.parents):
        if top is not None and step == top.parent:
            break
        if step.is_symlink():
            raise OutputError(
                f"{target}: {step} is a symbolic link; convert never writes through one"
            )
        if top is None:
            break  # in place: the file itself
    target.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
    try:
        descriptor = os.open(target, flags, 0o644)
    except OSError as error:
        raise OutputError(f"{target}: cannot write: {error.strerror or error}") from error
    with os.fdopen(descriptor, "w", encoding="utf-8", newline="") as written:
        written.write(text)


def run(args: argparse.Namespace, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    from hami_dra_webhook.cli.inputs import load_policy
    from hami_dra_webhook.core.settings.policy import PolicyError

    named = inputs(args)
    try:
        policy = load_policy(args.config, stderr)
        if named == ["-"]:
            if args.out or args.in_place:
                raise OutputError("convert - writes to stdout: drop --out and --in-place")
            return _convert_stdin(args, policy, stdin, stdout, stderr)
        if not named or "-" in named:
            raise OutputError("give manifest files or folders, or - alone for stdin")
        if not (args.out or args.in_place or args.diff):
            raise OutputError(
                "say where the results go: --out DIR or --in-place (or --diff to see them)"
            )
        files = _files(named, stderr)
        targets = _targets(files, args.out) if args.out else {path: path for path, _ in files}
    except OutputError as error:
        stderr.write(f"error: {error}\n")
        return exit_codes.USAGE
    except (PolicyError, FileNotFoundError) as error:
        stderr.write(f"error: {error}\n")
        return exit_codes.UNREADABLE
    totals = Totals()
    codes = [
        _convert_file(path, targets[path], args, policy, stdout, stderr, totals)
        for path, _ in files
    ]
    stderr.write(totals.line(args.diff) + "\n")
    remains = args.exit_code and totals.changed > 0
    return exit_codes.worst(*codes, exit_codes.LEGACY_REMAINS if remains else exit_codes.OK)


@dataclass
class Totals:
    """What a `convert` run did, said once at its end."""

    files: int = 0
    changed: int = 0
    workloads: int = 0
    templates: int = 0
    refused: int = 0

    def add(self, result: Any) -> None:
        self.files += 1
        self.changed += 1 if result.changed else 0
        self.workloads += len(result.converted)
        self.templates += len(result.templates)
        self.refused += len(result.refused)

    def line(self, diff: bool) -> str:
        verb = "would change" if diff else "changed"
        return (
            f"total: {self.files} file(s) read, {self.changed} {verb}; {self.workloads}"
            f" workload(s) converted, {self.templates} template(s) added, {self.refused} refused"
        )


def _converted(
    text: str, where: object, json_file: bool, args: argparse.Namespace, policy: Any, stderr: TextIO
) -> Any:
    """The conversion of one text, or None with what went wrong said (a file that cannot be
    parsed, a Helm template say, is reported and left as it is)."""
    from ruamel.yaml.error import YAMLError
    from yaml import YAMLError as LibYAMLError

    from hami_dra_webhook.migrate.convert import convert_text
    from hami_dra_webhook.migrate.yaml_write import WrittenWrong

    try:
        rules = admission_rules(args, policy)
        return convert_text(text, rules, args.namespace, json_file, embedded=args.embedded)
    except WrittenWrong as error:
        stderr.write(f"error: {where}: {WRITTEN_WRONG.format(error=error)}\n")
    except (ValueError, YAMLError, LibYAMLError) as error:
        stderr.write(f"unreadable: {where}: {error}\n")
    return None


def _convert_file(
    path: Path,
    target: Path,
    args: argparse.Namespace,
    policy: Any,
    stdout: TextIO,
    stderr: TextIO,
    totals: Totals,
) -> int:
    """One file converted into `target` (or shown as a diff); its exit code. A file that
    cannot be read is reported and left as it is (a Helm template in the tree, say); the rest
    goes on."""

    try:
        text, form = _read_text(path)
    except UnicodeDecodeError as error:
        stderr.write(f"unreadable: {path}: {not_utf8(error)}\n")
        return exit_codes.UNREADABLE
    except OSError as error:
        stderr.write(f"unreadable: {path}: cannot read: {error.strerror or error}\n")
        return exit_codes.UNREADABLE
    if not text.strip():
        stderr.write(f"warning: {path}: {EMPTY}\n")
        return exit_codes.OK
    result = _converted(text, path, path.suffix == ".json", args, policy, stderr)
    if result is None:
        return exit_codes.UNREADABLE
    _report(result, path, stderr)
    totals.add(result)
    code = _code(result)
    if args.diff:
        from hami_dra_webhook.cli.diff_view import colour_wanted, unified

        raw(stdout).write(unified(text, result.text, str(path), colour_wanted(stdout, args.color)))
        return code
    if args.in_place and not result.changed:
        return code
    try:
        _write(target, args.out, form.restore(result.text))
    except OutputError as error:
        stderr.write(f"error: {error}\n")
        return exit_codes.UNREADABLE
    what = ", ".join(result.converted) or "nothing to convert"
    if len(result.converted) > MAX_LISTED:
        shown = ", ".join(result.converted[:MAX_LISTED])
        what = f"{len(result.converted)} workloads ({shown}, ...)"
    templates = f"; {len(result.templates)} template(s) added" if result.templates else ""
    stdout.write(f"{target}: {what}{templates}\n")
    return code
