"""check: what each node loses under DRA of what legacy HAMi's device plugin did there (its
per-node config, its cards' cordon): a WARN naming each node and each loss, so that a node is
not moved without its owner knowing (core/migration/node_config.py)."""

from __future__ import annotations

from hami_dra_webhook.core.migration.device_cordons import rules_served
from hami_dra_webhook.core.migration.node_config import node_losses
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.preflight.report import Installation, Report
from hami_dra_webhook.preflight.snapshot import Snapshot, failed

CHECK = "legacy node settings"
MAX_NODES = 20  # named in the line; the JSON report's detail holds them all


def legacy_node_settings(
    snapshot: Snapshot, policy: Policy, target: Installation, report: Report
) -> None:
    if any(failed(read, CHECK, report) for read in (snapshot.legacy_configs, snapshot.nodes)):
        return
    configs = snapshot.legacy_configs if isinstance(snapshot.legacy_configs, list) else []
    nodes = snapshot.nodes if isinstance(snapshot.nodes, list) else []
    discovery = snapshot.dra_group if isinstance(snapshot.dra_group, dict) else {}
    losses, errors = node_losses(configs, nodes, policy, rules_served(discovery))
    for error in errors:
        report.add("WARN", CHECK, error, "fix the device plugin's config.json")
    if not losses:
        if configs:
            report.add("PASS", CHECK, "no node loses a per-node setting or cordon under DRA")
        return
    shown = [n.words for n in losses[:MAX_NODES]]
    more = f" (and {len(losses) - MAX_NODES} more nodes)" if len(losses) > MAX_NODES else ""
    report.add(
        "WARN",
        CHECK,
        f"{len(losses)} node(s) lose what legacy HAMi did there: " + " | ".join(shown) + more,
        "move them knowing it (docs/translation.md, Switches and scaling); cordon cards the"
        " device plugin hid with hami.io/device-cordon before migrate node",
    )
