"""`hami-dra-webhook check`: preflight of a live cluster, one line per check with the fix."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from hami_dra_webhook.cli import exit_codes
from hami_dra_webhook.cli.cluster_access import (
    ClusterUnavailable,
    add_cluster_flags,
    on_cluster,
    say_unavailable,
)
from hami_dra_webhook.cli.inputs import add_output, write_data

# A report's worst line as the command's exit code (docs/cli.md's table).
EXIT_CODE_OF_LEVEL = {
    "PASS": exit_codes.OK,
    "WARN": exit_codes.ATTENTION,
    "FAIL": exit_codes.REFUSED,
}


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "check",
        help="preflight a cluster for DRA mode and check the installed webhook",
        description="One line per check: PASS, WARN or FAIL, with the fix. Exit code: 0 all"
        " PASS, 1 a WARN, 2 a FAIL, 3 the cluster could not be reached.",
    )
    add_cluster_flags(parser)
    parser.add_argument("--config", metavar="FILE", help="HAMi device-config.yaml (policy)")
    parser.add_argument(
        "-n",
        "--namespace",
        "--webhook-namespace",
        dest="webhook_namespace",
        default="hami-system",
        help="where the chart is installed (hami-system, the documented one, not the context's)",
    )
    parser.add_argument("--release", default="hami-dra-webhook", help="the chart's full name")
    parser.add_argument(
        "--before-install",
        action="store_true",
        help="only what must hold before the chart is installed (Kubernetes, DRA, consumable"
        " capacity, GPU nodes, runtimes, legacy HAMi, quotas); not the chart's own parts",
    )
    add_output(parser, "one line a check")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    from hami_dra_webhook.cli.inputs import load_policy
    from hami_dra_webhook.core.settings.policy import PolicyError
    from hami_dra_webhook.preflight.report import Installation
    from hami_dra_webhook.preflight.run import run_before_install, run_checks

    try:
        policy = load_policy(args.config, stderr)
    except PolicyError as error:
        stderr.write(f"error: {error}\n")
        return exit_codes.UNREADABLE
    target = Installation(
        namespace=args.webhook_namespace,
        webhook_configuration=args.release,
        service=args.release,
        tls_secret=f"{args.release}-tls",
    )

    async def checks(api: Any) -> Any:
        await api.version(timeout=10)  # unreachable: no point in a line per check
        if args.before_install:
            return await run_before_install(api, policy, target)
        return await run_checks(api, policy, target)

    try:
        report = on_cluster(args, checks)
    except ClusterUnavailable as error:
        say_unavailable(error, stderr)
        return exit_codes.UNREADABLE
    if args.output != "text":
        write_data(report.as_json(), args.output, stdout)
    else:
        for line in report.lines:
            fix = f"\n      fix: {line.fix}" if line.fix and line.level != "PASS" else ""
            stdout.write(f"{line.level}  {line.check}: {line.detail}{fix}\n")
        if report.pools:
            from hami_dra_webhook.cli.inputs import table

            rows = [
                [p.pool, str(p.nodes), p.gpus, p.used, p.free, str(p.pods)] for p in report.pools
            ]
            headers = ["POOL", "NODES", "GPUS", "USED", "FREE", "GPU PODS"]
            stdout.write("\n" + "\n".join(table(headers, rows)) + "\n")
        if report.nodes:
            stdout.write("\nnode                            GPUs  shareable  memory\n")
            for node in report.nodes:
                sizes = ", ".join(sorted(set(node.memory)))
                shareable = "yes" if node.shareable else "no"
                stdout.write(f"{node.node:<32}{node.gpus:>4}  {shareable:<9}  {sizes}\n")
    return EXIT_CODE_OF_LEVEL[report.worst]
