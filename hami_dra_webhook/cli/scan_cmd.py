"""`hami-dra-webhook scan`: every workload that asks for legacy HAMi GPU resources, what it
becomes under DRA, and whether it converts, needs attention, or would be refused."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from hami_dra_webhook.cli import exit_codes
from hami_dra_webhook.cli.cluster_access import (
    ClusterUnavailable,
    add_cluster_flags,
    context_namespace,
    on_cluster,
    say_unavailable,
)
from hami_dra_webhook.cli.inputs import (
    add_exit_code,
    add_inputs,
    add_output,
    add_rules,
    admission_rules,
    dra_schedulers,
    exit_codes_help,
    inputs,
    nothing_read,
    write_data,
)


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "scan",
        help="find legacy HAMi GPU requests in manifests or a cluster and say what they become",
        description="Report every workload that uses legacy HAMi GPU resources: the request, the"
        " DRA request it becomes, and the outcome. "
        + exit_codes_help(
            "a workload needs attention (with --exit-code: legacy GPU requests remain)"
        ),
    )
    add_inputs(parser, "manifest files or folders")
    parser.add_argument("--cluster", action="store_true", help="scan the live cluster instead")
    add_cluster_flags(parser)
    parser.add_argument(
        "-n",
        "--namespace",
        help="the namespace to scan (cluster; default: the context's, as kubectl's), or the one"
        " of manifests without one (default: default)",
    )
    parser.add_argument(
        "-A", "--all-namespaces", action="store_true", help="every namespace (cluster)"
    )
    parser.add_argument("--config", metavar="FILE", help="HAMi device-config.yaml (policy)")
    add_rules(parser)
    add_exit_code(parser, "a workload the webhook would convert or refuse")
    add_output(
        parser,
        "a table",
        more=("markdown", "csv"),
        more_help="; markdown (a report for a change ticket) or csv (one row per container)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    from hami_dra_webhook.migrate.report import assess, worth_reporting

    if args.cluster == bool(inputs(args)):
        stderr.write("error: give manifest PATHs or --cluster (not both)\n")
        return exit_codes.USAGE
    unreadable: list[str] = []
    quotas: list[Any] = []  # from manifests; `check` judges a cluster's ResourceQuotas
    gpu_quotas: list[Any] | None = None  # a cluster's GPU quotas as they hold now
    loaded = _policy(args, stderr)
    if isinstance(loaded, int):
        return loaded
    policy, notes = loaded
    if args.cluster:
        try:
            workloads, policy, gpu_quotas = _cluster_workloads(args, policy, stderr, notes)
        except ClusterUnavailable as error:
            say_unavailable(error, stderr)
            return exit_codes.UNREADABLE
        if policy.webhook.device_memory_sizes:
            sizes = ", ".join(f"{s >> 20} MiB" for s in policy.webhook.device_memory_sizes)
            notes.append(f"GPU memory sizes from the driver's ResourceSlices: {sizes}")
    else:
        from_files = _manifest_workloads(args, policy, stdin, stderr)
        if isinstance(from_files, int):
            return from_files
        workloads, unreadable, quotas = from_files
        for problem in unreadable:
            stderr.write(f"unreadable: {problem}\n")
    rules = admission_rules(args, policy)
    reports = [assess(w, rules) for w in workloads if worth_reporting(w.pod, policy)]
    reports.sort(key=lambda r: (r.namespace, r.kind, r.name, r.embedded_at, r.source))
    _write(args.output, stdout, reports, notes, unreadable, quotas, gpu_quotas)
    outcomes = {r.outcome for r in reports}
    remains = args.exit_code and any(r.acted_on for r in reports)
    return exit_codes.worst(
        exit_codes.REFUSED if "refused" in outcomes else exit_codes.OK,
        exit_codes.ATTENTION if "attention" in outcomes or quotas else exit_codes.OK,
        exit_codes.LEGACY_REMAINS if remains else exit_codes.OK,
        exit_codes.UNREADABLE if unreadable else exit_codes.OK,
    )


def _write(
    output: str,
    stdout: TextIO,
    reports: list[Any],
    notes: list[str],
    unreadable: list[str],
    quotas: list[Any],
    gpu_quotas: list[Any] | None,
) -> None:
    """The report in the form `-o` names."""
    from hami_dra_webhook.migrate import render

    if output in ("markdown", "csv"):
        from hami_dra_webhook.migrate import ticket

        if output == "csv":
            stdout.write(ticket.as_csv(reports, unreadable))
        else:
            stdout.write(ticket.as_markdown(reports, quotas, unreadable))
    elif output != "text":
        write_data(render.as_data(reports, notes, unreadable, quotas, gpu_quotas), output, stdout)
    else:
        render.as_table(reports, notes, stdout, unreadable, quotas, gpu_quotas)


def _policy(args: argparse.Namespace, stderr: TextIO) -> tuple[Any, list[str]] | int:
    """The policy, and a note for each legacy-only setting of --config; an exit code when it
    cannot be read."""
    from hami_dra_webhook.cli.inputs import load_policy
    from hami_dra_webhook.core.settings.policy import PolicyError, policy_from_yaml

    try:
        policy = load_policy(args.config, stderr, notes=False)
        if not args.config:
            return policy, []
        with open(args.config, encoding="utf-8") as config:
            legacy_only = policy_from_yaml(config.read(), args.config).legacy_only_keys
    except PolicyError as error:
        stderr.write(f"error: {error}\n")
        return exit_codes.UNREADABLE
    from hami_dra_webhook.core.vendors.nvidia_notes import policy_notes

    return policy, [
        *(f"nvidia.{key} has no DRA equivalent and is not applied" for key in legacy_only),
        *policy_notes(policy),
    ]


def _manifest_workloads(
    args: argparse.Namespace, policy: Any, stdin: TextIO, stderr: TextIO
) -> tuple[list[Any], list[str], list[Any]] | int:
    """The workloads, unreadable files and legacy quotas of the manifests; an exit code when
    none could be read."""
    from hami_dra_webhook.files.manifests import ManifestError, read_manifests
    from hami_dra_webhook.migrate.quotas import quota_report
    from hami_dra_webhook.migrate.sources import from_manifests

    try:
        read = read_manifests(inputs(args), stdin)
    except ManifestError as error:
        stderr.write(f"error: {error}\n")
        return exit_codes.UNREADABLE
    if nothing_read(read, inputs(args), stderr):
        return exit_codes.UNREADABLE
    workloads = from_manifests(read.manifests, args.namespace or "default", dra_schedulers(args))
    found = (
        quota_report(m.document, policy, m.where, args.namespace or "default")
        for m in read.manifests
    )
    return workloads, read.unreadable, [q for q in found if q is not None]


def _cluster_workloads(
    args: argparse.Namespace, policy: Any, stderr: TextIO, notes: list[str]
) -> tuple[list[Any], Any, list[Any]]:
    """The cluster's workloads, its policy with the drivers' facts, its GPU quotas; `notes`
    gets what each node loses under DRA of legacy HAMi's per-node settings."""
    from hami_dra_webhook.cli.progress import ListingLine
    from hami_dra_webhook.cluster.quota.usage import read_gpu_quotas
    from hami_dra_webhook.cluster.state import cluster_policy
    from hami_dra_webhook.core.vendors.families import uses_legacy
    from hami_dra_webhook.kube.port import ApiError
    from hami_dra_webhook.migrate.sources import from_cluster

    namespace = None if args.all_namespaces else (args.namespace or context_namespace(args))
    progress = ListingLine(stderr, total=7)
    with progress:

        def step(kind: str) -> None:
            progress.advance(f"listing {kind}s")

        async def collect(api: Any) -> tuple[list[Any], Any, list[Any]]:
            known = await cluster_policy(api, policy, 30)
            workloads = await from_cluster(
                api, namespace, step, lambda pod: uses_legacy(pod, policy)
            )
            try:
                gpu_quotas = await read_gpu_quotas(api, known, 30, namespace)
            except ApiError as error:  # quotas are a part of the report, not a reason to fail it
                stderr.write(f"warning: GPU quotas not read: {error}\n")
                gpu_quotas = []
            notes.extend(await _node_losses(api, known, stderr))
            return workloads, known, gpu_quotas

        workloads, policy, gpu_quotas = on_cluster(args, collect)
    return workloads, policy, gpu_quotas


async def _node_losses(api: Any, policy: Any, stderr: TextIO) -> list[str]:
    """What each node loses under DRA (check's "legacy node settings", the same words)."""
    from hami_dra_webhook.cluster.moves.legacy_node_config import (
        device_plugin_configs,
        device_taint_rules_served,
    )
    from hami_dra_webhook.core.migration.node_config import node_losses
    from hami_dra_webhook.kube.port import ApiError, paths

    try:
        daemonsets = [
            d async for page in api.workload_pages("DaemonSet", None, timeout=30) for d in page
        ]
        configs = await device_plugin_configs(api, daemonsets, 30)
        nodes = await api.list_path(paths.NODES, [], timeout=30)
        served = await device_taint_rules_served(api, 30)
    except ApiError as error:  # a part of the report, not a reason to fail it
        stderr.write(f"warning: legacy per-node settings not read: {error}\n")
        return []
    losses, errors = node_losses(configs, nodes, policy, served)
    return [*errors, *(f"node {n.words}" for n in losses)]
