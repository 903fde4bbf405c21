"""What the cluster's ResourceSlices say that the families' asks need, read through each
profile's one hook (core/vendors/facts.py): which drivers are listed, what is read from their
slices, and the policy made from it."""

from __future__ import annotations

from typing import Any

from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY, Policy, policy_from_yaml
from hami_dra_webhook.core.vendors.facts import (
    fact_drivers,
    facts_of,
    read_cluster_facts,
    with_cluster_facts,
)
from hami_dra_webhook.core.vendors.families import PROFILES

HYGON_ON = policy_from_yaml("hamiDraWebhook: {vendors: {hygon: {convert: true}}}").policy
HAMI = DEFAULT_POLICY.webhook.driver_name
HYGON = HYGON_ON.webhook.vendors.hygon.driver_name


def _slice(driver: str, node: str, *devices: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"driver": driver, "nodeName": node, "devices": list(devices)}}


def _gpu(name: str, memory: str, device_type: str = "hami-gpu") -> dict[str, Any]:
    web = DEFAULT_POLICY.webhook
    return {
        "name": name,
        "attributes": {web.attributes.type: {"string": device_type}},
        "capacity": {web.capacity_keys.memory: {"value": memory}},
    }


def _hcu(name: str, cores: str) -> dict[str, Any]:
    return {"name": name, "capacity": {"cores": {"value": cores}}}


def test_only_the_drivers_of_families_that_read_facts_are_listed() -> None:
    assert fact_drivers(DEFAULT_POLICY) == (HAMI,)
    assert fact_drivers(HYGON_ON) == (HAMI, HYGON)
    # Every other family reads nothing: it has no facts driver.
    others = {p.key for p in PROFILES if p.facts_driver(HYGON_ON) is None}
    assert others == {"ascend", "amd", "aws-neuron"}


def test_each_family_reads_its_own_drivers_slices() -> None:
    slices = {
        HAMI: [
            _slice(HAMI, "a", _gpu("g0", "80Gi"), _gpu("g1", "24Gi"), _gpu("m0", "10Gi", "mig")),
            _slice(HAMI, "b", _gpu("g2", "80Gi"), _gpu("g3", "lots")),
            _slice("other.example.com", "c", _gpu("x", "96Gi")),
        ],
        HYGON: [
            _slice(HYGON, "h", _hcu("h0", "120"), _hcu("h1", "128"), _hcu("h2", "?")),
            _slice(HAMI, "h", _hcu("not-hygon", "64")),
        ],
    }
    facts, unreadable = read_cluster_facts(slices, HYGON_ON)
    assert facts == (("nvidia", (80 << 30, 24 << 30)), ("hygon", (128, 120)))
    assert unreadable == [
        "device g3 publishes an unreadable memory size 'lots'",
        "device h2 publishes an unreadable Hygon compute-unit count '?'",
    ]
    assert facts_of(facts, "hygon") == (128, 120) and facts_of(facts, "ascend") == ()


def test_the_policy_takes_the_facts_and_keeps_its_own_where_there_are_none() -> None:
    facts = (("nvidia", (80 << 30, 40 << 30)), ("hygon", (128, 120)))
    known = with_cluster_facts(HYGON_ON, facts, capacity=True)
    assert known.webhook.device_memory_sizes == (80 << 30, 40 << 30)
    assert known.webhook.vendors.hygon.compute_units == (128, 120)
    configured = policy_from_yaml(
        "hamiDraWebhook: {deviceMemorySizes: [24Gi], vendors: {hygon: {convert: true,"
        " computeUnits: [64]}}}"
    ).policy
    kept = with_cluster_facts(configured, (("nvidia", ()), ("hygon", ())), capacity=True)
    assert kept is configured  # nothing said: the same object (callers cache on it)
    dropped = with_cluster_facts(configured, (), capacity=False)
    assert dropped.webhook.consumable_capacity is False
    assert dropped.webhook.device_memory_sizes == (24 << 30,)


def test_at_most_eight_compute_unit_alternatives_are_taken() -> None:
    """DRA allows 8 firstAvailable alternatives: one per card model, the largest first."""
    units = tuple(range(200, 100, -10))
    known: Policy = with_cluster_facts(HYGON_ON, (("hygon", units),), capacity=True)
    assert known.webhook.vendors.hygon.compute_units == units[:8]
