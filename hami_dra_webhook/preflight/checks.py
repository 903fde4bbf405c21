"""The checks of `check`: each judges the snapshot (no I/O) and adds its lines to the report.
Every line is named after what it checks, never after a function; a read the API failed is a
FAIL line of the check that needed it."""

from __future__ import annotations

from collections.abc import Callable

from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.preflight import api_checks, legacy_checks, node_checks
from hami_dra_webhook.preflight.node_losses import legacy_node_settings
from hami_dra_webhook.preflight.report import Installation, Report
from hami_dra_webhook.preflight.snapshot import Snapshot
from hami_dra_webhook.preflight.vendors import vendors
from hami_dra_webhook.preflight.webhook_checks import webhook

# In the order the report lists them.
CHECKS: tuple[Callable[[Snapshot, Policy, Installation, Report], None], ...] = (
    *api_checks.CHECKS,
    *node_checks.CHECKS,
    *legacy_checks.CHECKS,
    legacy_node_settings,
)


def judge(snapshot: Snapshot, policy: Policy, target: Installation) -> Report:
    report = Report()
    for check in CHECKS:
        check(snapshot, policy, target, report)
    vendors(snapshot, policy, report)
    webhook(snapshot, target, report)
    return report
