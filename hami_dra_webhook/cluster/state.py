"""What the webhook must know about the cluster: is consumable capacity effective, and do
DeviceClasses map legacy resource names (DRAExtendedResource)?

On 1.34 and 1.35 the DRAConsumableCapacity gate is off by default, and kube-apiserver then drops
`capacity` from claims without an error: a converted pod would silently get whole GPUs. A
server-side dry-run create of a probe template tells: does `capacity` survive?
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from hami_dra_webhook.core.migration.move_state import FleetSummary, MoveWatch, fleet_summary
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.translate.claims import API_VERSION, KIND, template_labels
from hami_dra_webhook.core.vendors.facts import (
    ClusterFacts,
    fact_drivers,
    read_cluster_facts,
    with_cluster_facts,
)
from hami_dra_webhook.core.vendors.nvidia import driver_gpus
from hami_dra_webhook.kube.port import ApiError, KubeApi, paths

Capacity = Literal["unknown", "effective", "dropped"]
PROBE_NAME = "hami-dra-webhook-capacity-probe"
log = logging.getLogger("hami_dra_webhook.cluster")


def probe_template(policy: Policy, namespace: str) -> JsonObject:
    web = policy.webhook
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        # The webhook's labels: its ServiceAccount may write no other template, dry runs too
        # (the chart's webhook-identity ValidatingAdmissionPolicy).
        "metadata": {"name": PROBE_NAME, "namespace": namespace, "labels": template_labels()},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "probe",
                            "exactly": {
                                "deviceClassName": web.device_class_name,
                                "count": 1,
                                "capacity": {"requests": {web.capacity_keys.cores: "1"}},
                            },
                        }
                    ]
                }
            }
        },
    }


def capacity_kept(answer: JsonObject) -> bool:
    try:
        request = answer["spec"]["spec"]["devices"]["requests"][0]
        return bool(request["exactly"]["capacity"]["requests"])
    except (KeyError, IndexError, TypeError):
        return False


def published(slices: list[JsonObject], policy: Policy) -> tuple[int, int]:
    """How many GPUs the driver publishes, and on how many nodes."""
    found = list(driver_gpus(slices, policy))
    return len(found), len({node for node, _ in found})


async def read_facts(
    api: KubeApi,
    policy: Policy,
    timeout: float,
    listed: Mapping[str, list[JsonObject]] | None = None,
) -> ClusterFacts:
    """What the families' drivers publish that their asks need (core/vendors/facts.py), with
    each device that publishes something unreadable logged. A driver's slices in `listed`
    (driver -> slices) are not listed again."""
    slices = dict(listed or {})
    for driver in fact_drivers(policy):
        if driver not in slices:
            slices[driver] = await api.list_resource_slices(driver, timeout=timeout)
    facts, unreadable = read_cluster_facts(slices, policy)
    for words in unreadable:
        log.warning("%s", words)
    return facts


async def cluster_policy(
    api: KubeApi,
    policy: Policy,
    timeout: float,
    listed: Mapping[str, list[JsonObject]] | None = None,
) -> Policy:
    """The policy as the cluster's drivers make it (card sizes, compute units: read from their
    ResourceSlices, the settings the fallback): what every tool judges with, as the webhook
    does (`check`, `scan --cluster`, `migrate status|node|wave`: one reader, one answer)."""
    facts = await read_facts(api, policy, timeout, listed)
    return with_cluster_facts(policy, facts, policy.webhook.consumable_capacity)


@dataclass
class ClusterState:
    capacity: Capacity = "unknown"
    api_answered: bool = False
    # legacy resource name -> DeviceClass whose extendedResourceName claims it
    extended_resources: dict[str, str] = field(default_factory=dict)
    last_error: str = ""
    failed_checks: list[int] = field(default_factory=list)  # HTTP status of each failure, 0: none
    # What the families' drivers publish that their asks need (NVIDIA's card memory sizes,
    # Hygon's compute units: core/vendors/facts.py); empty: none seen (yet).
    facts: ClusterFacts = ()
    # GPUs the driver publishes, and on how many nodes; -1: not read yet.
    published_gpus: int = -1
    publishing_nodes: int = -1
    # GPU nodes by pool and the node moves under way (migrate node, migrate wave); None: the
    # Nodes could not be read (a chart older than the permission to list them).
    fleet: FleetSummary | None = None
    # Moves followed across checks: ended moves' durations and stops since the metrics last
    # took them (take_move_events).
    move_watch: MoveWatch = field(default_factory=MoveWatch)
    moves_ended: list[float] = field(default_factory=list)
    move_stops: list[str] = field(default_factory=list)

    def take_move_events(self) -> tuple[list[float], list[str]]:
        """The ended moves' durations and the stops' steps seen since the last call."""
        taken = self.moves_ended, self.move_stops
        self.moves_ended, self.move_stops = [], []
        return taken

    async def _read_fleet(self, api: KubeApi, timeout: float) -> None:
        try:
            nodes = await api.list_path(paths.NODES, [], timeout=timeout)
        except ApiError as error:  # the rest of the check stands without it
            log.warning("the Nodes could not be read (GPU pools and moves unknown): %s", error)
            self.fleet = None
            return
        now = time.time()
        self.fleet = fleet_summary(nodes, now)
        ended, stops = self.move_watch.see(nodes, now)
        self.moves_ended += ended
        self.move_stops += stops

    async def refresh(self, api: KubeApi, policy: Policy, namespace: str, timeout: float) -> None:
        """Check everything once. `api_answered` (which readiness waits for) turns true only
        once the first whole check has run, so that no admission is answered before the
        DeviceClasses that claim legacy resources are known (issue 34, finding 5)."""
        answered = False
        try:
            await api.version(timeout=timeout)
            answered = True
            answer = await api.create_template(
                namespace, probe_template(policy, namespace), dry_run=True, timeout=timeout
            )
            before = self.capacity
            self.capacity = "effective" if capacity_kept(answer) else "dropped"
            if self.capacity != before and self.capacity == "dropped":
                log.warning(
                    "kube-apiserver drops consumable capacity from claims: enable the"
                    " DRAConsumableCapacity feature gate (kube-apiserver, kube-scheduler,"
                    " kube-controller-manager, kubelet)"
                )
            legacy = set(policy.legacy_resource_names)
            self.extended_resources = {
                str(spec["extendedResourceName"]): str(c["metadata"]["name"])
                for c in await api.list_device_classes(timeout=timeout)
                if isinstance(spec := c.get("spec"), dict)
                and spec.get("extendedResourceName") in legacy
            }
            slices = await api.list_resource_slices(policy.webhook.driver_name, timeout=timeout)
            self.published_gpus, self.publishing_nodes = published(slices, policy)
            listed = {policy.webhook.driver_name: slices}
            self.facts = await read_facts(api, policy, timeout, listed)
            await self._read_fleet(api, timeout)
            self.last_error = ""
        except ApiError as error:
            self.last_error = str(error)
            self.failed_checks.append(error.status)
            log.warning("cluster check failed: %s", error)
        finally:
            self.api_answered = self.api_answered or answered
