"""Between waves, `migrate wave` waits until kube-controller-manager has written the claims of
the pods the last wave sent back (cluster/moves/fleet.FleetMove._settle), against the real
1.36 control plane: a converted pod whose template does not exist yet gets no claim from the
real resourceclaim controller, so the wait ends at its bound, naming the pod; once the
template exists, the controller writes the claim and the wait ends at once."""

from __future__ import annotations

from typing import Any

import pytest

from hami_dra_webhook.cluster.moves import kept_lists
from hami_dra_webhook.cluster.moves.fleet import FleetMove
from hami_dra_webhook.core.migration.pools import Scope
from hami_dra_webhook.core.outcome.decision import Converted
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from hami_dra_webhook.core.translate.pod import translate_pod
from tests.support.cluster import Cluster, wait_for
from tests.support.loop import run
from tests.support.told import Told

pytestmark = pytest.mark.plane  # the shared control plane (tests/conftest.py)


async def _settle(fleet: FleetMove, api: Any) -> None:
    """The settling as a wave runs it: the Pending pods watched, not listed every poll."""
    async with kept_lists.pending_pods(api) as pending:
        fleet._pending = pending
        try:
            await fleet._settle()
        finally:
            fleet._pending = None


def test_the_next_wave_waits_for_the_claims_of_evicted_pods(kube: Cluster, real_api: Any) -> None:
    namespace = kube.create_namespace("settle")
    legacy = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "back", "namespace": namespace},
        "spec": {
            "nodeSelector": {"example.com/nowhere": "true"},  # never bound: it stays Pending
            "containers": [
                {
                    "name": "cuda",
                    "image": "ubuntu:22.04",
                    "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}},
                }
            ],
        },
    }
    decision = translate_pod(legacy, DEFAULT_POLICY, namespace)
    assert isinstance(decision, Converted)
    try:
        kube.apply(decision.apply(legacy), namespace=namespace)
        said = Told()
        fleet = FleetMove(
            real_api, DEFAULT_POLICY, Scope("all"), "dra", [], said, settle=3.0, poll=0.5
        )
        run(_settle(fleet, real_api))
        names = [name for name, _ in said.steps]
        assert names == ["settling", "unsettled"], said.steps
        assert f"{namespace}/back" in said.steps[-1][1], said.steps
        assert "--kube-api-qps" in said.steps[-1][1]

        kube.apply(decision.templates[0], namespace=namespace)
        wait_for(
            lambda: kube.pod(namespace, "back")["status"].get("resourceClaimStatuses"),
            "kube-controller-manager writing the pod's claim",
        )
        again = Told()
        fleet.events = again
        run(_settle(fleet, real_api))
        assert again.steps == [], again.steps
        assert said.waves == again.waves == []  # no wave starts, no node moves here
    finally:
        kube.kubectl("delete", "pods", "--all", "-n", namespace, "--grace-period=0", "--force")
        kube.kubectl("delete", "namespace", namespace, "--wait=false")
