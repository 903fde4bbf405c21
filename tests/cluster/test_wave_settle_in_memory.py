"""Between waves, `migrate wave` waits for the claims of the pods the last wave sent back
(cluster/moves/fleet.FleetMove._settle), in process on the in-memory API: a converted pod
without its claim keeps the fleet settling until the bound, named; once its claim is written
(here by the test, standing in for kube-controller-manager's resourceclaim controller, which
tests/cluster/test_wave_settle.py runs for real), the wait ends at once."""

from __future__ import annotations

from typing import Any

from hami_dra_webhook.cluster.moves import kept_lists
from hami_dra_webhook.cluster.moves.fleet import FleetMove
from hami_dra_webhook.core.migration.pools import Scope
from hami_dra_webhook.core.outcome.decision import Converted
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from hami_dra_webhook.core.translate.pod import translate_pod
from hami_dra_webhook.kube.port import paths
from tests.support.loop import run
from tests.support.memory_api import MemoryApi
from tests.support.told import Told

TEAM = "team"


def _converted_pod() -> dict[str, Any]:
    legacy = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "back", "namespace": TEAM},
        "spec": {
            "containers": [
                {
                    "name": "cuda",
                    "image": "x",
                    "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}},
                }
            ]
        },
        "status": {"phase": "Pending"},
    }
    decision = translate_pod(legacy, DEFAULT_POLICY, TEAM)
    assert isinstance(decision, Converted)
    return decision.apply(legacy)


async def _settle(fleet: FleetMove, api: MemoryApi) -> None:
    async with kept_lists.pending_pods(api) as pending:  # type: ignore[arg-type]
        fleet._pending = pending
        try:
            await fleet._settle()
        finally:
            fleet._pending = None


def test_the_next_wave_waits_for_the_claims_of_evicted_pods() -> None:
    api = MemoryApi()
    api.namespaces(TEAM)
    api.put(paths.pods(TEAM), _converted_pod())
    said = Told()
    fleet = FleetMove(api, DEFAULT_POLICY, Scope("all"), "dra", [], said, settle=0.5, poll=0.05)  # type: ignore[arg-type]
    run(_settle(fleet, api))
    assert [name for name, _ in said.steps] == ["settling", "unsettled"], said.steps
    assert f"{TEAM}/back" in said.steps[-1][1] and "--kube-api-qps" in said.steps[-1][1]

    (pod,) = api.objects(paths.pods(TEAM))
    claims = [{"name": e["name"], "resourceClaimName": f"back-{e['name']}"}
              for e in pod["spec"]["resourceClaims"]]  # fmt: skip
    pod["status"]["resourceClaimStatuses"] = claims  # as the resourceclaim controller writes it
    api.replace(paths.pods(TEAM), pod)
    again = Told()
    fleet.events = again
    run(_settle(fleet, api))
    assert again.steps == [], again.steps
    assert said.waves == again.waves == []  # no wave starts, no node moves here
