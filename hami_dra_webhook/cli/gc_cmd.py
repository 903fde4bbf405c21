"""`hami-dra-webhook gc`: one garbage-collection pass over unused managed templates."""

from __future__ import annotations

import argparse
import time
from typing import Any, TextIO, cast

from hami_dra_webhook.cli import exit_codes
from hami_dra_webhook.cli.cluster_access import (
    ClusterUnavailable,
    add_cluster_flags,
    on_cluster,
    say_unavailable,
)
from hami_dra_webhook.cli.inputs import add_dry_run, dry_run, duration


def _seconds(text: str) -> float:
    """A positive, finite duration (argparse turns the error into a usage message)."""
    value = duration(text)
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
        "--grace", type=_seconds, default=3600.0, help="more than 0, as 3600, 90m or 1h (1h)"
    )
    parser.add_argument(
        "-n",
        "--namespace",
        help="only this namespace (default: every namespace, as the webhook's own collector)",
    )
    add_dry_run(
        parser,
        "list what would be deleted",
        "also ask the API server to check each delete (RBAC, preconditions), deleting nothing",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    from hami_dra_webhook.cluster.templates.gc import DryRun, collect_garbage

    async def collect(api: Any) -> Any:
        return await collect_garbage(
            api,
            now=time.time(),
            grace=args.grace,
            dry_run=cast(DryRun, dry_run(args)),
            namespace=args.namespace,
        )

    try:
        report = on_cluster(args, collect)
    except ClusterUnavailable as error:
        say_unavailable(error, stderr)
        return exit_codes.UNREADABLE
    verb = "would delete" if dry_run(args) else "deleted"
    for where in report.deleted:
        stdout.write(f"{verb} {where}\n")
    stderr.write(report.summary(dry_run=bool(dry_run(args))) + "\n")
    return exit_codes.OK
