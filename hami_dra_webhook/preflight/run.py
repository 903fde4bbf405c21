"""`check`'s entry: read the cluster once, then judge what was read."""

from __future__ import annotations

from dataclasses import replace

from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.kube.port import KubeApi
from hami_dra_webhook.preflight.before_install import judge_before_install
from hami_dra_webhook.preflight.checks import judge
from hami_dra_webhook.preflight.report import Installation, Report
from hami_dra_webhook.preflight.snapshot import gather


async def run_checks(
    api: KubeApi, policy: Policy, target: Installation, timeout: float = 20.0
) -> Report:
    snapshot = await gather(api, policy, target, timeout)
    return judge(snapshot, snapshot.policy or policy, target)


async def run_before_install(
    api: KubeApi, policy: Policy, target: Installation, timeout: float = 20.0
) -> Report:
    """`check --before-install`. Its dry-run claim goes to `default`: the chart's namespace
    need not exist yet."""
    snapshot = await gather(api, policy, replace(target, namespace="default"), timeout)
    return judge_before_install(snapshot, snapshot.policy or policy, target)
