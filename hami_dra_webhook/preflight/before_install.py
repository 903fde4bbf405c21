"""`check --before-install`: only what must hold before the chart is installed. The checks of
what the chart brings (its DeviceClass, the driver, the webhook) are left out, since they can
only fail before it; a legacy HAMi cluster is told to move in stages."""

from __future__ import annotations

from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.preflight import api_checks, legacy_checks, node_checks
from hami_dra_webhook.preflight.node_losses import legacy_node_settings
from hami_dra_webhook.preflight.report import Installation, Report
from hami_dra_webhook.preflight.snapshot import Snapshot

# The checks whose lines mean the same before and after installing.
SAME_CHECKS = api_checks.CHECKS_OF_THE_CLUSTER + legacy_checks.CHECKS_OF_THE_CLUSTER


def judge_before_install(snapshot: Snapshot, policy: Policy, target: Installation) -> Report:
    report = Report()
    for check in SAME_CHECKS:
        check(snapshot, policy, target, report)
    node_checks.gpu_nodes_before_install(snapshot, report)
    legacy_checks.legacy_before_install(snapshot, policy, report)
    legacy_node_settings(snapshot, policy, target, report)
    return report
