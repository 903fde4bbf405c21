"""`check`'s entry: read the cluster once, then judge what was read."""

from __future__ import annotations

from hami_dra_webhook.core.policy import Policy
from hami_dra_webhook.kube.port import KubeApi
from hami_dra_webhook.preflight.checks import judge
from hami_dra_webhook.preflight.report import Installation, Report
from hami_dra_webhook.preflight.snapshot import gather


async def run_checks(
    api: KubeApi, policy: Policy, target: Installation, timeout: float = 20.0
) -> Report:
    return judge(await gather(api, policy, target, timeout), policy, target)
