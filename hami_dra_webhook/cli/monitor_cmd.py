"""`hami-dra-webhook monitor`: the node monitor (the chart runs it as a DaemonSet on the nodes
the DRA driver serves), or, with `--once`, what a claims folder holds now, read at a node's
shell without a cluster (docs/node-monitor.md)."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from pathlib import Path
from typing import Any, TextIO

from hami_dra_webhook.cli import exit_codes
from hami_dra_webhook.cli.cluster_access import add_cluster_flags

CLAIMS_ROOT = "/usr/local/vgpu/claims"  # hostHookPath of the HAMi DRA driver v0.1.0


def _interval(text: str) -> float:
    """A duration, as every command takes one (core/model/durations.py), more than 0."""
    from hami_dra_webhook.core.model.durations import parse_seconds

    try:
        value = parse_seconds(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be more than 0 seconds")
    return value


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "monitor",
        help="run the node monitor: HAMi's per-container GPU metrics and feedback loop for DRA",
        description="Read the HAMi-core region of every claim the DRA driver prepared on this"
        " node, name its pod and containers from the cluster, serve HAMi's per-container"
        " metrics (hami_vgpu_memory_used_bytes, ...) and run HAMi's feedback loop. With --once:"
        " print what the claims folder holds now, without a cluster.",
    )
    parser.add_argument(
        "--claims-root",
        default=CLAIMS_ROOT,
        help=f"the driver's claims folder (default {CLAIMS_ROOT})",
    )
    parser.add_argument(
        "--node-name",
        default=os.environ.get("NODE_NAME"),
        help="this node's name (default: $NODE_NAME; the chart sets it)",
    )
    parser.add_argument(
        "--driver-name",
        default="hami-core-gpu.project-hami.io",
        help="the DRA driver whose claims are read (default hami-core-gpu.project-hami.io)",
    )
    parser.add_argument("--host", default="0.0.0.0", help="metrics address (default 0.0.0.0)")
    parser.add_argument(
        "--port", type=int, default=9394, help="metrics port (default 9394, as HAMi's)"
    )
    _node_flags(parser)
    parser.add_argument(
        "--once", action="store_true", help="print what the claims folder holds now and exit"
    )
    parser.add_argument(
        "-o", "--output", choices=("text", "json"), default="text",
        help="with --once: Prometheus exposition text (default) or JSON",
    )  # fmt: skip
    parser.add_argument(
        "--log-level", choices=("debug", "info", "warning", "error"), default="info"
    )
    add_cluster_flags(parser)
    parser.set_defaults(run=run)


def _node_flags(parser: argparse.ArgumentParser) -> None:
    """What the monitor does on its node: the feedback loop, old names, the process check."""
    parser.add_argument(
        "--feedback",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run HAMi's feedback loop: priority blocking, SM limit off while a task is alone"
        " (default on, as HAMi; it writes into the regions)",
    )
    parser.add_argument(
        "--feedback-interval",
        type=_interval,
        default=5.0,
        metavar="DURATION",
        help="time between rounds of the feedback loop, as 5, 5s or 1m (default 5s, as HAMi)",
    )
    parser.add_argument(
        "--legacy-metrics", action="store_true", help="also send HAMi's old metric names"
    )
    parser.add_argument(
        "--proc",
        default="/proc",
        help="the host's /proc, asked whether a slot's process is alive (default /proc)",
    )
    parser.add_argument(
        "--no-process-check",
        action="store_true",
        help="count every slot whose status says running, as HAMi does (killed ones included)",
    )


def run(args: argparse.Namespace, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    from hami_dra_webhook.monitor.run import MonitorSettings, read_once

    root = Path(args.claims_root)
    proc = None if args.no_process_check else Path(args.proc)
    if args.once:
        if not root.is_dir():
            stderr.write(
                f"error: {root} is not a folder: pass the DRA driver's claims folder with"
                f" --claims-root (the HAMi DRA driver v0.1.0 writes {CLAIMS_ROOT})\n"
            )
            return exit_codes.UNREADABLE
        stdout.write(read_once(root, proc, args.legacy_metrics, args.output == "json"))
        return exit_codes.OK
    if not args.node_name:
        stderr.write(
            "error: the monitor needs this node's name: pass --node-name or set NODE_NAME"
            " (the chart sets it from spec.nodeName); or read the folder once with --once\n"
        )
        return exit_codes.USAGE
    if not 0 < args.feedback_interval <= 3600:
        stderr.write("error: --feedback-interval must be between 0 and 3600 seconds\n")
        return exit_codes.USAGE
    settings = MonitorSettings(
        claims_root=root, node_name=args.node_name, driver=args.driver_name, host=args.host,
        port=args.port, feedback=args.feedback, feedback_interval=args.feedback_interval,
        legacy_metrics=args.legacy_metrics, proc=proc,
    )  # fmt: skip
    return _serve(settings, args, stderr)


def _serve(settings: Any, args: argparse.Namespace, stderr: TextIO) -> int:
    from hami_dra_webhook.kube.connect import ClusterAccessError, connect
    from hami_dra_webhook.monitor.run import Monitor
    from hami_dra_webhook.server.logs import configure

    configure(args.log_level)

    async def monitored() -> None:
        api = await connect(args.kubeconfig, args.context)
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for number in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(number, task.cancel)
        try:
            await Monitor(settings, api).run()
        finally:
            await api.close()

    try:
        asyncio.run(monitored())
    except ClusterAccessError as error:
        stderr.write(f"error: {error}\n")
        return exit_codes.UNREADABLE
    except OSError as error:
        stderr.write(f"error: the metrics port {settings.host}:{settings.port}: {error.strerror}\n")
        return exit_codes.UNREADABLE
    except asyncio.CancelledError:
        pass
    return exit_codes.OK
