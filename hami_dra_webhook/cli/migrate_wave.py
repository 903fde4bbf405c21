"""`hami-dra-webhook migrate wave`: move a set of nodes (named, by label selector, or a whole
pool) wave by wave, a canary node first. The command parses its flags into the use case's
request and prints how it ended; cluster/moves/wave_case.py decides (the plan, the refusals,
the ending), core/migration/wave_plan.py plans the waves, cluster/moves/fleet.py moves them.

Exit codes: 0 every wave moved (or a plan without blockers), 2 a wave's plan has blockers
(nothing of that wave started; `--force` moves anyway), 3 a move stopped or the cluster could
not be read (its nodes stay cordoned; run the same command again to resume), 64 usage.
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any, TextIO

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

if TYPE_CHECKING:
    from hami_dra_webhook.cluster.moves.fleet import WaveOutcome
    from hami_dra_webhook.cluster.moves.wave_case import Ending, FleetRead, WaveRequest, WaveRun
    from hami_dra_webhook.core.migration.pool_plan import Step
    from hami_dra_webhook.core.migration.wave_plan import FleetPlan


def _endings() -> dict[Ending, int]:
    from hami_dra_webhook.cluster.moves.wave_case import Ending

    return {
        Ending.BAD_SELECTION: exit_codes.USAGE,
        Ending.PLANNED: exit_codes.OK,
        Ending.REFUSED: exit_codes.REFUSED,
        Ending.MOVED: exit_codes.OK,
        Ending.STOPPED: exit_codes.UNREADABLE,
    }


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
    from hami_dra_webhook.cluster.moves.wave_case import WaveRun
    from hami_dra_webhook.core.settings.policy import PolicyError

    try:
        request = _request(args)
    except ValueError as error:
        stderr.write(f"error: {error}\n")
        return exit_codes.USAGE
    try:
        given = load_policy(args.config, stderr)
    except PolicyError as error:
        stderr.write(f"error: {error}\n")
        return exit_codes.UNREADABLE
    run = WaveRun(request)
    screen = _Screen(args.output == "text", request.dry_run, stdout, stderr)
    unreachable = False
    try:
        on_cluster(args, lambda api: run.run(api, given, screen))
    except ClusterUnavailable as error:
        say_unavailable(error, stderr)
        unreachable = True
    if run.read is None:  # nothing was read: nothing to say but that
        return exit_codes.UNREADABLE
    return _ended(args, run, screen, unreachable, stdout, stderr)


def _request(args: argparse.Namespace) -> WaveRequest:
    """The use case's request from the command line (ValueError: a usage error, said)."""
    from hami_dra_webhook.cluster.moves.wave_case import WaveRequest
    from hami_dra_webhook.core.migration.pools import Scope
    from hami_dra_webhook.core.migration.wave_plan import MaxUnavailable, parse_max_unavailable

    if not (args.nodes or args.selector or args.pool):
        raise ValueError("name the nodes to move: NODE..., -l SELECTOR or --pool POOL")
    limit = parse_max_unavailable(args.max_unavailable) if args.max_unavailable else None
    return WaveRequest(
        to=args.to,
        nodes=tuple(args.nodes),
        selector=args.selector or "",
        pool=args.pool or "",
        batch=args.batch,
        limit=limit or MaxUnavailable(),
        canary=args.canary,
        with_canary=not args.no_canary,
        scope=Scope(args.scope) if args.scope else None,
        release=args.release,
        dry_run=dry_run(args) is not None,
        force=args.force,
        timeout=args.timeout,
        settle=args.settle,
        canary_pod=args.canary_pod,
    )


class _Screen:
    """What the command shows as the run goes (the use case's WaveScreen): the fleet's plan,
    a refusal, then the waves' progress lines (cli/progress.py)."""

    def __init__(self, text: bool, dry_run: bool, stdout: TextIO, stderr: TextIO) -> None:
        self.text, self.dry_run, self.stdout, self.stderr = text, dry_run, stdout, stderr
        self.progress = WaveSteps(stdout, quiet=True)

    def planned(self, read: FleetRead, ending: Ending | None) -> None:
        from hami_dra_webhook.cluster.moves.wave_case import Ending

        if ending is Ending.BAD_SELECTION:
            for error in read.fleet.errors:
                self.stderr.write(f"error: {error}\n")
            return
        if self.text:
            self.stdout.write(_fleet_text(read.fleet, read.plans))
            if ending is Ending.REFUSED and not self.dry_run:
                self.stdout.write(
                    "refusing: the first wave's plan has blockers (--force moves anyway)\n"
                )
        nodes = sum(len(wave) for wave in read.fleet.waves)
        self.progress = WaveSteps(self.stdout, quiet=not self.text, nodes=nodes)

    def step(self, name: str, detail: str) -> None:
        self.progress.step(name, detail)

    def wave(self, index: int, total: int, nodes: list[str]) -> None:
        self.progress.wave(index, total, nodes)

    def node(self, name: str) -> Any:
        return self.progress.node(name)


def _ended(
    args: argparse.Namespace,
    run: WaveRun,
    screen: _Screen,
    unreachable: bool,
    stdout: TextIO,
    stderr: TextIO,
) -> int:
    """The end of the run, said: its JSON (or the last text line) and its exit code."""
    from hami_dra_webhook.cluster.moves.wave_case import Ending, ending_of

    assert run.read is not None
    result = run.read.as_json()
    if run.move is None:  # it ended before moving
        if run.ending not in (None, Ending.BAD_SELECTION):
            result["previews"] = run.read.previews()
        if not screen.text:
            write_data(result | {"moved": False}, args.output, stdout)
        return _endings()[run.ending] if run.ending else exit_codes.UNREADABLE
    screen.progress.finish()
    waves = run.read.fleet.waves
    moved = run.ending is Ending.MOVED
    result["waves"] = [outcome.as_json() for outcome in run.outcomes]
    result["moved"] = moved
    ending = run.ending or ending_of(run.outcomes)  # (none: the cluster stopped answering)
    _say_stop(ending, run.outcomes, stderr)
    code = _endings()[ending] or (exit_codes.UNREADABLE if unreachable else exit_codes.OK)
    result["timeline"] = screen.progress.timeline
    result["seconds"] = round(time.monotonic() - screen.progress.started, 1)
    if not screen.text:
        write_data(result, args.output, stdout)
    elif moved:
        stdout.write(f"moved {sum(len(w) for w in waves)} node(s) in {len(waves)} wave(s)\n")
    return code


def _say_stop(ending: Ending, outcomes: list[WaveOutcome], stderr: TextIO) -> None:
    """Where the fleet stopped, if it did, on stderr."""
    from hami_dra_webhook.cluster.moves.wave_case import Ending

    if ending is Ending.REFUSED:
        last = outcomes[-1]
        stderr.write(
            f"stopped before wave {len(outcomes)} ({', '.join(last.nodes)}): its plan has"
            " blockers (see the plan; --force moves anyway); the waves before it moved\n"
        )
    elif ending is Ending.STOPPED:
        for node, why in outcomes[-1].failed.items():
            stderr.write(f"error: {node}: {why}\n")
        stderr.write(
            f"stopped at wave {len(outcomes)}: the nodes whose move failed stay cordoned,"
            " each with its state; run the same command again to resume, or move a node back"
            " with migrate node NODE --to legacy|dra\n"
        )


def _fleet_text(fleet: FleetPlan, plans: list[list[Step]]) -> str:
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
