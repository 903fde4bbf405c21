"""`hami-dra-webhook migrate wave`: move a set of nodes (named, by label selector, or a whole
pool) wave by wave, a canary node first (core/migration/wave_plan.py, cluster/moves/fleet.py).

Exit codes: 0 every wave moved (or a plan without blockers), 2 a wave's plan has blockers
(nothing of that wave started; `--force` moves anyway), 3 a move stopped or the cluster could
not be read (its nodes stay cordoned; run the same command again to resume), 64 usage.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, TextIO

from hami_dra_webhook.cli import exit_codes
from hami_dra_webhook.cli.cluster_access import ClusterUnavailable, on_cluster, say_unavailable
from hami_dra_webhook.cli.inputs import (
    add_canary_pod,
    add_dry_run,
    dry_run,
    duration,
    write_data,
)
from hami_dra_webhook.cli.progress import WaveSteps


def add_wave_parser(actions: Any, common: Any) -> None:
    wave = actions.add_parser(
        "wave",
        help="move many nodes in waves, a canary first (plan, then node by node moves)",
        description=(
            "Moves a set of nodes to the DRA or the legacy pool in waves: first, unless a"
            " stopped move is resumed, a canary node alone; then waves of --batch nodes"
            " (and at most --max-unavailable nodes or GPUs). Before each wave its GPU pods are"
            " planned on the cluster as it is then, every node of the wave left out: a pod that"
            " would be lost or fit nowhere stops the fleet before the wave starts. The nodes of a"
            " wave move together, each as `migrate node` moves it; the first wave with a failed"
            " move stops the fleet, its nodes cordoned. Each move's state is on its Node: run the"
            " same command again to resume."
        ),
    )
    wave.add_argument("nodes", metavar="NODE", nargs="*", help="nodes to move, by name")
    wave.add_argument("--to", required=True, choices=("dra", "legacy"), help="the pool to join")
    wave.add_argument(
        "-l", "--selector", help="nodes by label selector, as kubectl reads it (gpu-type=a100)"
    )
    wave.add_argument("--pool", choices=("dra", "legacy"), help="every GPU node now in this pool")
    wave.add_argument("--batch", type=_positive, default=1, help="nodes per wave (1)")
    wave.add_argument(
        "--max-unavailable",
        default="",
        metavar="N|Ngpus",
        help="at most N nodes, or N GPUs, out of service at once (no limit but --batch)",
    )
    wave.add_argument("--canary", metavar="NODE", help="the node moved alone first")
    wave.add_argument(
        "--no-canary", action="store_true", help="no canary wave (the waves start at once)"
    )
    add_dry_run(
        wave,
        "print the waves and each wave's plan on the cluster as it is now",
        "the same (the moves' evictions are asked of the API server as each wave starts)",
    )
    wave.add_argument(
        "--force", action="store_true", help="move a wave even when its plan has blockers"
    )
    wave.add_argument(
        "--timeout",
        default=600.0,
        type=duration,
        help="each node's move limit (600, 90s, 10m; 10m); when it passes, run again to resume",
    )
    wave.add_argument(
        "--settle",
        default=300.0,
        type=duration,
        help="between waves, the most to wait for kube-controller-manager to write the claims"
        " of the pods the last wave evicted (300, 90s, 5m; 5m); then on, saying how many wait",
    )
    add_canary_pod(wave)
    common(wave)
    wave.set_defaults(run=run_wave)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number, 1 or more")
    return value


def run_wave(args: argparse.Namespace, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    from hami_dra_webhook.cli.inputs import load_policy
    from hami_dra_webhook.core.migration.wave_plan import parse_max_unavailable
    from hami_dra_webhook.core.settings.policy import PolicyError

    if not (args.nodes or args.selector or args.pool):
        stderr.write("error: name the nodes to move: NODE..., -l SELECTOR or --pool POOL\n")
        return exit_codes.USAGE
    try:
        limit = parse_max_unavailable(args.max_unavailable) if args.max_unavailable else None
    except ValueError as error:
        stderr.write(f"error: {error}\n")
        return exit_codes.USAGE
    try:
        given = load_policy(args.config, stderr)
        policy, inventory, names = on_cluster(args, lambda api: _read(api, args, given))
    except PolicyError as error:
        stderr.write(f"error: {error}\n")
        return exit_codes.UNREADABLE
    except ClusterUnavailable as error:
        say_unavailable(error, stderr)
        return exit_codes.UNREADABLE
    return _plan_and_move(args, policy, (inventory, names), limit, stdout, stderr)


async def _read(api: Any, args: argparse.Namespace, given: Any) -> tuple[Any, Any, list[str]]:
    """The policy with the cluster's facts (as every tool judges), the inventory and the
    names of the nodes the command selects."""
    from hami_dra_webhook.cluster.moves.inventory import read_inventory, read_scope
    from hami_dra_webhook.cluster.state import cluster_policy
    from hami_dra_webhook.core.migration.pools import Scope
    from hami_dra_webhook.kube.port import paths

    policy = await cluster_policy(api, given, 10)
    scope = Scope(args.scope) if args.scope else await read_scope(api, args.release, 10)
    inventory = await read_inventory(api, policy, scope)
    names = list(args.nodes)
    if args.selector:
        query = [("labelSelector", args.selector)]
        found = await api.list_path(paths.NODES, query, timeout=20)
        names += sorted(str(n["metadata"]["name"]) for n in found)
    if args.pool:
        names += sorted(
            n.name for n in inventory.nodes.values() if n.gpu_node and n.pool == args.pool
        )
    return policy, inventory, names


def _plan_and_move(
    args: argparse.Namespace,
    policy: Any,
    read: tuple[Any, list[str]],
    limit: Any,
    stdout: TextIO,
    stderr: TextIO,
) -> int:
    from hami_dra_webhook.core.migration.pool_plan import plan_move
    from hami_dra_webhook.core.migration.wave_pacing import pacing_note
    from hami_dra_webhook.core.migration.wave_plan import MaxUnavailable, plan_fleet

    inventory, names = read
    fleet = plan_fleet(
        inventory,
        names,
        args.to,
        args.batch,
        limit or MaxUnavailable(),
        args.canary,
        with_canary=not args.no_canary,
    )
    result: dict[str, Any] = {"fleet": fleet.as_json(), "scope": inventory.scope.mode}
    text = args.output == "text"
    if fleet.errors:
        for error in fleet.errors:
            stderr.write(f"error: {error}\n")
        if not text:
            write_data(result | {"moved": False}, args.output, stdout)
        return exit_codes.USAGE
    plans = [plan_move(inventory, wave, args.to, policy) for wave in fleet.waves]
    if text:
        stdout.write(_fleet_text(fleet, plans))
    first_blocked = bool(plans) and any(s.blocks for s in plans[0])
    result["pacing"] = [pacing_note(plan) for plan in plans]
    if dry_run(args) or (first_blocked and not args.force):
        result["previews"] = [[s.as_json() for s in plan] for plan in plans]
        if first_blocked and not dry_run(args) and text:
            stdout.write("refusing: the first wave's plan has blockers (--force moves anyway)\n")
        if not text:
            write_data(result | {"moved": False}, args.output, stdout)
        return exit_codes.REFUSED if first_blocked else exit_codes.OK
    return _move(args, policy, inventory.scope, fleet.waves, result, stdout, stderr)


def _move(
    args: argparse.Namespace,
    policy: Any,
    scope: Any,
    waves: list[list[str]],
    result: dict[str, Any],
    stdout: TextIO,
    stderr: TextIO,
) -> int:
    from hami_dra_webhook.cluster.moves.fleet import FleetMove

    text = args.output == "text"
    progress = WaveSteps(stdout, quiet=not text, nodes=sum(len(w) for w in waves))
    started: list[FleetMove] = []

    async def move(api: Any) -> bool:
        fleet = FleetMove(
            api,
            policy,
            scope,
            args.to,
            waves,
            progress,
            timeout=args.timeout,
            force=args.force,
            canary_pod=args.canary_pod,
            settle=args.settle,
            release=args.release,
        )
        started.append(fleet)
        return await fleet.run()

    code = exit_codes.OK
    try:
        moved = on_cluster(args, move)
    except ClusterUnavailable as error:
        say_unavailable(error, stderr)
        moved, code = False, exit_codes.UNREADABLE
    progress.finish()
    outcomes = started[0].outcomes if started else []
    result["waves"] = [outcome.as_json() for outcome in outcomes]
    result["moved"] = moved
    code = _stopped(outcomes, stderr) or code
    result["timeline"] = progress.timeline
    result["seconds"] = round(time.monotonic() - progress.started, 1)
    if not text:
        write_data(result, args.output, stdout)
    elif moved:
        stdout.write(f"moved {sum(len(w) for w in waves)} node(s) in {len(waves)} wave(s)\n")
    return code


def _stopped(outcomes: list[Any], stderr: TextIO) -> int:
    """Where the fleet stopped, if it did, said on stderr; its exit code."""
    last = outcomes[-1] if outcomes else None
    if last is not None and last.refused:
        stderr.write(
            f"stopped before wave {len(outcomes)} ({', '.join(last.nodes)}): its plan has"
            " blockers (see the plan; --force moves anyway); the waves before it moved\n"
        )
        return exit_codes.REFUSED
    if last is not None and last.failed:
        for node, why in last.failed.items():
            stderr.write(f"error: {node}: {why}\n")
        stderr.write(
            f"stopped at wave {len(outcomes)}: the nodes whose move failed stay cordoned,"
            " each with its state; run the same command again to resume, or move a node back"
            " with migrate node NODE --to legacy|dra\n"
        )
        return exit_codes.UNREADABLE
    return exit_codes.OK


def _fleet_text(fleet: Any, plans: list[list[Any]]) -> str:
    from hami_dra_webhook.core.migration.wave_pacing import pacing_note

    lines = [f"fleet: {sum(len(w) for w in fleet.waves)} node(s) to the {fleet.to} pool"]
    lines += [f"  skipped {node}: {why}" for node, why in fleet.skipped]
    for index, (wave, plan) in enumerate(zip(fleet.waves, plans, strict=True), 1):
        canary = " (canary)" if fleet.canary and wave == [fleet.canary] else ""
        gpus = sum(fleet.gpus[n] for n in wave)
        lines.append(f"wave {index}{canary}: {', '.join(wave)} ({gpus} GPUs)")
        when = "now" if index == 1 else "now (planned again before it starts)"
        for step in plan:
            mark = "!! " if step.blocks else "ok "
            lines.append(f"  {mark}{step.node} {step.namespace}/{step.name}: {step.goes} [{when}]")
        note = pacing_note(plan)
        if note:
            lines.append(f"  warning: {note}")
    return "\n".join(lines) + "\n"
