"""What the cluster's ResourceSlices say that the families' asks need, read through one hook
on each profile (`facts_driver`, `read_facts`, `with_facts`: core/vendors/profile.py): NVIDIA's
card memory sizes (gpumem-percentage), Hygon's compute units per card model. The webhook's
cluster check (cluster/state.py) and `scan --cluster` list the drivers' slices and call these;
nothing outside a family's module names what it reads. No I/O."""

from __future__ import annotations

from collections.abc import Mapping

from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.vendors.families import BY_KEY, PROFILES

# (family key, its values) for each family that reads any: hashable, so a policy made from
# them can be cached on them.
ClusterFacts = tuple[tuple[str, tuple[int, ...]], ...]


def fact_drivers(policy: Policy) -> tuple[str, ...]:
    """The drivers whose ResourceSlices to list, each once."""
    drivers = (profile.facts_driver(policy) for profile in PROFILES)
    return tuple(dict.fromkeys(driver for driver in drivers if driver))


def read_cluster_facts(
    slices: Mapping[str, list[JsonObject]], policy: Policy
) -> tuple[ClusterFacts, list[str]]:
    """Each family's facts from its driver's slices (`slices`: driver -> its slices, as listed
    for `fact_drivers`), and what could not be read, in words."""
    facts: list[tuple[str, tuple[int, ...]]] = []
    unreadable: list[str] = []
    for profile in PROFILES:
        driver = profile.facts_driver(policy)
        if driver is None:
            continue
        read = profile.read_facts(slices.get(driver, []), policy)
        facts.append((profile.key, read.values))
        unreadable += read.unreadable
    return tuple(facts), unreadable


def facts_of(facts: ClusterFacts, key: str) -> tuple[int, ...]:
    """One family's values (empty: none read)."""
    return next((values for found, values in facts if found == key), ())


def with_cluster_facts(policy: Policy, facts: ClusterFacts, capacity: bool) -> Policy:
    """The policy with what the cluster's slices say in each family's settings (configured
    values are the fallback where they say nothing) and whether kube-apiserver keeps consumable
    capacity. The same object when nothing changes."""
    for key, values in facts:
        policy = BY_KEY[key].with_facts(policy, values)
    web = policy.webhook
    if web.consumable_capacity == capacity:
        return policy
    return policy.with_webhook(web.model_copy(update={"consumable_capacity": capacity}))
