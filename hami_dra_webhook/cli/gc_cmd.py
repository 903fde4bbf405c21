"""`hami-dra-webhook gc`: one garbage-collection pass over unused managed templates."""

from __future__ import annotations

import argparse
import time
from typing import Any, TextIO

from hami_dra_webhook.cli import exit_codes
from hami_dra_webhook.cli.cluster_access import (
    ClusterUnavailable,
    add_cluster_flags,
    on_cluster,
    say_unavailable,
)


def _seconds(text: str) -> float:
    """A positive, finite number of seconds (argparse turns the error into a usage message)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(
            f"{text} must be more than 0 seconds: templates younger than it are kept"
        )
    return value


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "gc",
        help="delete managed ResourceClaimTemplates that no pod uses",
        description="Delete templates made by hami-dra-webhook that no pod in their namespace"
        " references and that were not used within the grace period.",
    )
    add_cluster_flags(parser)
    parser.add_argument(
        "--grace", type=_seconds, default=3600.0, help="seconds, more than 0 (3600)"
    )
    parser.add_argument("--dry-run", action="store_true", help="list what would be deleted")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    from hami_dra_webhook.cluster.gc import collect_garbage

    async def collect(api: Any) -> Any:
        return await collect_garbage(api, now=time.time(), grace=args.grace, dry_run=args.dry_run)

    try:
        report = on_cluster(args, collect)
    except ClusterUnavailable as error:
        say_unavailable(error, stderr)
        return exit_codes.UNREADABLE
    verb = "would delete" if args.dry_run else "deleted"
    for where in report.deleted:
        stdout.write(f"{verb} {where}\n")
    stderr.write(report.summary() + "\n")
    return exit_codes.OK
