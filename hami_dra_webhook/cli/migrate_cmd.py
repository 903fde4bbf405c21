"""`hami-dra-webhook migrate`: a live cluster moved in stages, legacy HAMi and DRA side by side.

- `migrate status`: per pool its nodes, GPUs and free capacity; per namespace its legacy and
  converted pods, and what keeps each legacy pod from moving to DRA.
- `migrate node NODE --to dra|legacy`: a plan first (every GPU pod on the node and where it
  would go), then the move (cluster/moves/node.py), resumable.
- `migrate wave --to dra|legacy NODE...|-l SELECTOR|--pool POOL`: many nodes in waves, a
  canary first (cli/migrate_wave.py).

Exit codes: 0 done (or a plan without blockers), 2 the plan has blockers (a pod that no
controller re-creates, or one that fits nowhere; `--force` moves anyway), 3 the cluster could
not be read or the move stopped (run it again: it resumes), 64 usage.
"""

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
from hami_dra_webhook.cli.inputs import (
    add_canary_pod,
    add_dry_run,
    add_output,
    dry_run,
    duration,
    write_data,
)
from hami_dra_webhook.cli.progress import Steps

MIB = 1 << 20  # core.model.quantity.MIB (the CLI imports the core lazily)


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "migrate",
        help="move a live cluster from legacy HAMi to DRA in stages (status, node, wave)",
        description="Legacy HAMi and DRA side by side on separate nodes: `status` shows both"
        " pools, `node` moves one node between them with a plan first, `wave` moves many in"
        " waves, a canary first.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    status = actions.add_parser(
        "status",
        help="pools, free capacity, and what keeps each legacy pod from moving",
        description="Per pool: nodes, GPUs, free capacity. Per namespace: legacy pods against"
        " converted pods, and what blocks each legacy pod from moving to DRA. Exit 0.",
    )
    _common(status)
    status.set_defaults(run=run_status)
    node = actions.add_parser(
        "node",
        help="move one node between the pools (plan, cordon, evict, relabel, wait, uncordon)",
        description="Moves NODE to the DRA or the legacy pool: prints the plan (every GPU pod"
        " on it and where it would go), then cordons it, evicts those pods through the"
        " Eviction API (PodDisruptionBudgets respected), switches its hami.io/gpu-pool label"
        " through `moving` (served by neither side) and uncordons it once the new side serves"
        " it. The state of a move is kept on the Node: run it again to resume. Exit codes: 0"
        " moved, 2 the plan has blockers (--force moves anyway), 3 the move stopped or the"
        " cluster could not be read (run again to resume).",
    )
    node.add_argument("node", metavar="NODE")
    node.add_argument("--to", required=True, choices=("dra", "legacy"), help="the pool to join")
    add_dry_run(
        node,
        "print the plan only",
        "print the plan and ask the API server whether each pod may be evicted now"
        " (PodDisruptionBudgets, RBAC), changing nothing",
    )
    node.add_argument(
        "--force",
        action="store_true",
        help="move even when the plan has pods that would be lost or fit nowhere",
    )
    node.add_argument(
        "--timeout",
        default=600.0,
        type=duration,
        help="the whole move's limit (600, 90s, 10m, 1h; 10m); when it passes, run again to resume",
    )
    add_canary_pod(node)
    _common(node)
    node.set_defaults(run=run_node)
    from hami_dra_webhook.cli.migrate_wave import add_wave_parser

    add_wave_parser(actions, _common)


def _common(parser: argparse.ArgumentParser) -> None:
    add_cluster_flags(parser)
    parser.add_argument("--config", metavar="FILE", help="HAMi device-config.yaml (policy)")
    parser.add_argument(
        "--release",
        default="hami-dra-webhook",
        help="the chart's full name: its MutatingWebhookConfiguration gives the scope",
    )
    parser.add_argument(
        "--scope",
        choices=("all", "namespaces", "workloads"),
        help="judge with this migration scope instead of the installed webhook's",
    )
    add_output(parser, "progress lines and tables")


def _inventory(args: argparse.Namespace, policy: Any) -> tuple[Any, Any]:
    """The policy with the cluster's facts (card sizes from the driver's slices, as the
    webhook and scan --cluster judge), and the inventory judged with it."""
    from hami_dra_webhook.cluster.moves.inventory import read_inventory, read_scope
    from hami_dra_webhook.cluster.state import cluster_policy
    from hami_dra_webhook.core.migration.pools import Scope

    async def read(api: Any) -> tuple[Any, Any]:
        known = await cluster_policy(api, policy, 10)
        scope = Scope(args.scope) if args.scope else await read_scope(api, args.release, 10)
        return known, await read_inventory(api, known, scope)

    return on_cluster(args, read)


def _gpu_quotas(args: argparse.Namespace, policy: Any) -> Any:
    from hami_dra_webhook.cluster.quota.usage import read_gpu_quotas

    async def read(api: Any) -> Any:
        return await read_gpu_quotas(api, policy, 10)

    return on_cluster(args, read)


def _read(args: argparse.Namespace, stderr: TextIO) -> tuple[Any, Any] | int:
    """The policy and the cluster's inventory, or the exit code after saying what failed."""
    from hami_dra_webhook.cli.inputs import load_policy
    from hami_dra_webhook.core.settings.policy import PolicyError

    try:
        return _inventory(args, load_policy(args.config, stderr))
    except PolicyError as error:
        stderr.write(f"error: {error}\n")
    except ClusterUnavailable as error:
        say_unavailable(error, stderr)
    return exit_codes.UNREADABLE


# -- status -----------------------------------------------------------------------------------


def run_status(args: argparse.Namespace, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    read = _read(args, stderr)
    if isinstance(read, int):
        return read
    from hami_dra_webhook.cli.migrate_status import status_report, status_text

    policy, inventory = read
    report = status_report(inventory, policy)
    try:
        report["quotas"] = [line.as_json() for line in _gpu_quotas(args, policy)]
    except ClusterUnavailable as error:
        say_unavailable(error, stderr)
        return exit_codes.UNREADABLE
    if args.output != "text":
        write_data(report, args.output, stdout)
    else:
        stdout.write(status_text(report))
    return exit_codes.OK


# -- node -------------------------------------------------------------------------------------


def run_node(args: argparse.Namespace, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    from hami_dra_webhook.core.migration.pool_plan import plan_move

    read = _read(args, stderr)
    if isinstance(read, int):
        return read
    policy, inventory = read
    if args.node not in inventory.nodes:
        stderr.write(f"error: no node named {args.node}\n")
        return exit_codes.UNREADABLE
    plan = plan_move(inventory, args.node, args.to, policy)
    blockers = [s for s in plan if s.blocks]
    result: dict[str, Any] = {
        "node": args.node,
        "to": args.to,
        "scope": inventory.scope.mode,
        "plan": [s.as_json() for s in plan],
        "blockers": len(blockers),
    }
    text = args.output == "text"
    if text:
        stdout.write(_plan_text(args.node, args.to, plan))
    preview = dry_run(args)
    if preview == "server":
        try:
            result["evictions"] = on_cluster(args, lambda api: _evictions_now(api, plan))
        except ClusterUnavailable as error:
            say_unavailable(error, stderr)
            return exit_codes.UNREADABLE
        if text:
            for answer in result["evictions"]:
                where = f"{answer['namespace']}/{answer['name']}"
                stdout.write(f"eviction of {where} now: {answer['answer']}\n")
    if preview or (blockers and not args.force):
        if blockers and not preview and text:
            stdout.write(_refusal(blockers))
        if not text:
            write_data(result | {"moved": False}, args.output, stdout)
        return exit_codes.REFUSED if blockers else exit_codes.OK
    return _move(args, policy, result, stdout, stderr)


def _move(
    args: argparse.Namespace,
    policy: Any,
    result: dict[str, Any],
    stdout: TextIO,
    stderr: TextIO,
) -> int:
    """The move itself, after its plan: its progress as it goes, its result at the end."""
    from hami_dra_webhook.cluster.moves.node import MoveError, NodeMove

    text = args.output == "text"
    progress = Steps(stdout, quiet=not text)

    async def move(api: Any) -> Any:
        return await NodeMove(
            api,
            policy,
            args.node,
            args.to,
            progress,
            args.timeout,
            canary=args.canary_pod,
            release=args.release,
        ).run()

    code = exit_codes.OK
    try:
        on_cluster(args, move)
        result["moved"] = True
    except MoveError as error:
        result |= {"moved": False, "error": str(error), "resumable": error.resumable}
        stderr.write(f"error: {error}\n")
        if error.resumable:
            stderr.write("the move's state is on the node: run the same command again to resume\n")
        code = exit_codes.UNREADABLE
    except ClusterUnavailable as error:
        result |= {"moved": False, "error": str(error), "resumable": True}
        say_unavailable(error, stderr)
        code = exit_codes.UNREADABLE
    result["timeline"] = progress.timeline
    result["seconds"] = round(time.monotonic() - progress.started, 1)
    if not text:
        write_data(result, args.output, stdout)
    return code


def _refusal(blockers: list[Any]) -> str:
    claims = [f"{s.namespace}/{c}" for s in blockers for c in s.claims]
    if claims:
        return (
            f"refusing: DRA claims are allocated on the node ({', '.join(claims[:10])}); end or"
            " move their pods first, or --force to evict them (they come back converted on"
            " another DRA node)\n"
        )
    return (
        f"refusing: {len(blockers)} pod(s) would be lost or fit nowhere; free capacity,"
        " re-create bare pods elsewhere, or --force\n"
    )


async def _evictions_now(api: Any, plan: list[Any]) -> list[dict[str, str]]:
    """What the Eviction API answers now for each pod of the plan, asked with dryRun=All."""
    from hami_dra_webhook.kube.port import ApiError

    answers = []
    for step in plan:
        try:
            await api.evict(step.namespace, step.name, timeout=30, dry_run=True)
            answer = "allowed"
        except ApiError as error:
            refused = {429: "refused by a PodDisruptionBudget", 404: "gone", 403: "forbidden"}
            answer = f"{refused.get(error.status, f'HTTP {error.status}')}: {error}"
        answers.append({"namespace": step.namespace, "name": step.name, "answer": answer})
    return answers


def _plan_text(node: str, to: str, plan: list[Any]) -> str:
    if not plan:
        return f"plan: no GPU pod of the pool {node} leaves is on it\n"
    lines = [f"plan: {len(plan)} GPU pod(s) leave {node} for the {to} pool"]
    for step in plan:
        notes = []
        if step.lost:
            notes.append("BARE POD: no controller re-creates it after eviction")
        if step.claims:
            notes.append(
                f"holds the driver's claim(s) {', '.join(step.claims)} on it: a rollback to legacy"
                " refuses while DRA claims are allocated on the node (--force evicts the pod; it"
                " comes back converted on another DRA node)"
            )
        if step.budgets:
            budgets = ", ".join(step.budgets)
            notes.append(f"PodDisruptionBudget {budgets} allows no disruption now: eviction waits")
        mark = "!! " if step.blocks else "ok "
        lines.append(
            f"  {mark}{step.namespace}/{step.name} ({step.owner or 'no controller'}): {step.goes}"
        )
        lines += [f"       {note}" for note in notes]
    return "\n".join(lines) + "\n"
