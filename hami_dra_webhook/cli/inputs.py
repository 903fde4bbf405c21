"""What every command reads: manifest inputs as kubectl takes them (positional paths and
`-f/--filename`, repeatable, `-` for stdin) and the device-config policy."""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from hami_dra_webhook.admission.admitted import AdmissionRules
from hami_dra_webhook.core.migration.pools import SCOPE_LABEL, SCOPE_VALUE, SCOPES, Scope
from hami_dra_webhook.core.model.durations import parse_seconds
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.files.policy_file import read_policy


def exit_codes_help(one: str | None) -> str:
    """The exit codes a command returns (cli/exit_codes.py), `one` saying what 1 means for it
    (None: it never exits 1)."""
    meaning_of_one = f" 1 {one}," if one else ""
    return (
        f"Exit codes: 0 done,{meaning_of_one} 2 something would be refused, 3 unreadable"
        " input, 64 usage."
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


EMPTY = "empty, no Kubernetes objects in it"


def nothing_read(read: Any, named: list[str], stderr: TextIO) -> bool:
    """Say which inputs were empty; True (said as one error, no warning beside it) when nothing
    was read at all and nothing was unreadable either: the command has nothing to work on."""
    if not (read.manifests or read.unreadable):
        stderr.write(f"error: no Kubernetes objects in {', '.join(named)}: the input is empty\n")
        return True
    if not read.unreadable and not any(_is_object(m.document) for m in read.manifests):
        stderr.write(
            f"error: no Kubernetes objects in {', '.join(named)}: no document has an apiVersion"
            " and a kind (is it a manifest? kubectl refuses it too)\n"
        )
        return True
    for source in read.empty:
        stderr.write(f"warning: {source}: {EMPTY}\n")
    return False


def _is_object(document: Any) -> bool:
    return isinstance(document, dict) and bool(document.get("apiVersion") and document.get("kind"))


def load_policy(path: str | None, stderr: TextIO, *, notes: bool = True) -> Policy:
    """The policy for a command; its file's warning goes to stderr, and (`notes`) what its
    legacy settings keep or lose under DRA (core/vendors/nvidia_notes.policy_notes)."""
    loaded = read_policy(path)
    if loaded.warning:
        stderr.write(f"warning: {path}: {loaded.warning}\n")
    if path and notes:
        from hami_dra_webhook.core.vendors.nvidia_notes import policy_notes

        for note in policy_notes(loaded.policy):
            stderr.write(f"note: {path}: {note}\n")
    return loaded.policy


def table(headers: list[str], rows: list[list[str]]) -> list[str]:
    """Columns aligned as kubectl aligns them: upper-case headers, two spaces between."""
    widths = [max(len(str(x)) for x in column) for column in zip(headers, *rows, strict=True)]
    return [
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [headers, *rows]
    ]


OUTPUTS = ("text", "json", "yaml")


# The namespaces whose pods the installed webhook never sees: kube-system and the chart's own
# (hami-system, the documented one); the chart's webhook.excludeNamespaces add to them.
DEFAULT_EXCLUDED = "kube-system,hami-system"


def add_excluded(parser: argparse.ArgumentParser) -> None:
    """`--excluded-namespaces`: judge the pods of these namespaces as the webhook does (left)."""
    parser.add_argument(
        "--excluded-namespaces",
        default=DEFAULT_EXCLUDED,
        metavar="NS,NS",
        type=lambda value: frozenset(n.strip() for n in value.split(",") if n.strip()),
        help="namespaces the webhook never converts, comma-separated, as the chart installs it"
        " (default: %(default)s: kube-system and the chart's namespace; add the chart's"
        " webhook.excludeNamespaces)",
    )


VOLCANO_SCHEDULERS = frozenset({"volcano"})


def add_volcano(parser: argparse.ArgumentParser) -> None:
    """`--volcano-jobs convert|leave`: judge Volcano Jobs as the webhook does with the chart's
    volcano.convertJobs on (their task templates converted at the Job's admission)."""
    parser.add_argument(
        "--volcano-jobs",
        choices=("leave", "convert"),
        default="leave",
        help="leave (default): a Volcano Job's pods are Volcano's, left as they are; convert:"
        " as the chart's volcano.convertJobs (on where Volcano's scheduler has DRA enabled)"
        " converts its task templates when the Job is created",
    )


def dra_schedulers(args: argparse.Namespace) -> frozenset[str]:
    """The Volcano schedulers whose Jobs are converted, per --volcano-jobs."""
    return VOLCANO_SCHEDULERS if args.volcano_jobs == "convert" else frozenset()


def add_rules(parser: argparse.ArgumentParser) -> None:
    """The webhook's admission rules as the chart sets them: `--excluded-namespaces`,
    `--volcano-jobs` and `--scope`."""
    add_excluded(parser)
    add_volcano(parser)
    parser.add_argument(
        "--scope",
        choices=SCOPES,
        default="all",
        help="the chart's migration.scope (default: %(default)s); workloads: only pod templates"
        f" labelled {SCOPE_LABEL}={SCOPE_VALUE} are converted (namespaces judges as all: the"
        " namespaces' labels are the cluster's)",
    )


def admission_rules(args: argparse.Namespace, policy: Policy) -> AdmissionRules:
    """The rules the webhook admits pods by, from `add_rules`'s flags."""
    return AdmissionRules(
        policy=policy,
        excluded_namespaces=args.excluded_namespaces,
        scope=Scope(args.scope),
        volcano_schedulers=dra_schedulers(args),
    )


def add_exit_code(parser: argparse.ArgumentParser, remains: str) -> None:
    """`--exit-code`: 1 while legacy GPU requests remain (a CI gate, as `kubectl diff`)."""
    parser.add_argument(
        "--exit-code",
        action="store_true",
        help=f"exit 1 while legacy GPU requests remain ({remains}), 0 once none do, as"
        " kubectl diff and git diff --exit-code; 2 and 3 keep their meaning: a CI gate",
    )


def add_output(
    parser: argparse.ArgumentParser,
    text_help: str = "lines for people",
    more: tuple[str, ...] = (),
    more_help: str = "",
) -> None:
    """`-o text|json|yaml` (and `more`); json and yaml hold the same data."""
    parser.add_argument(
        "-o",
        "--output",
        choices=(*OUTPUTS, *more),
        default="text",
        help=f"text ({text_help}; `table` is the same), json or yaml (the same data){more_help}",
        type=lambda value: "text" if value in ("table", "wide") else value,
    )


def write_data(data: Any, output: str, stdout: TextIO) -> None:
    """`data` (JSON-shaped) as JSON or YAML."""
    if output == "yaml":
        import yaml

        stdout.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    else:
        stdout.write(json.dumps(data, indent=2) + "\n")


def duration(text: str) -> float:
    """Seconds from `90`, `90s`, `15m`, `1h30m`, `2d` (core/model/durations.py); argparse's `type=`:
    a wrong one is a usage error that shows the forms."""
    try:
        return parse_seconds(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_dry_run(parser: argparse.ArgumentParser, client: str, server: str) -> None:
    """kubectl's `--dry-run[=client|server]` (`none`, the default, does it); the value is None,
    "client" or "server"."""
    parser.add_argument(
        "--dry-run",
        nargs="?",
        const="client",
        default=None,
        choices=("none", "client", "server"),
        type=lambda value: value,
        help=f"client (also bare --dry-run): {client}; server: {server}",
    )


def dry_run(args: argparse.Namespace) -> str | None:
    value: str | None = args.dry_run
    return None if value == "none" else value


def add_canary_pod(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--canary-pod",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="to dra: before a node is uncordoned, run a converted pod (1000 MiB, 10 %% of a"
        " GPU) there with the driver pod's image and check the environment its container sees"
        " (default: on)",
    )
