"""Issue 64, item 2, the pure half: the legacy device plugin's per-node config read as HAMi
v2.10 reads it (Go's encoding/json: keys in any case), what each node loses under DRA, and a
node's `hami.io/device-cordon` as DeviceTaintRules (core/migration/node_config.py,
device_cordons.py). The cluster half: tests/e2e/test_legacy_node_settings.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hami_dra_webhook.core.migration.device_cordons import (
    CordonError,
    cordoned_uuids,
    node_label_value,
    plan_cordons,
    rule_for,
)
from hami_dra_webhook.core.migration.node_config import (
    NodeConfigError,
    config_map_of,
    entry_losses,
    node_config_entries,
    node_losses,
)
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY, policy_from_mapping

# HAMi v2.10's chart default (charts/hami/values.yaml devicePlugin.nodeConfiguration.config)
CHART_DEFAULT = {
    "nodeconfig": [
        {
            "name": "your-node-name",
            "operatingmode": "hami-core",
            "devicememoryscaling": 1,
            "devicesplitcount": 10,
            "preconfigureddevicememory": 0,
            "enablenumatopology": False,
            "migstrategy": "none",
            "filterdevices": {"uuid": [], "index": []},
            "enablegetpreferredallocation": False,
        }
    ]
}


def test_the_chart_defaults_entry_loses_only_the_split_count() -> None:
    (entry,) = node_config_entries(json.dumps(CHART_DEFAULT), "ConfigMap x/y")
    assert entry_losses(entry, DEFAULT_POLICY) == (
        "deviceSplitCount 10: DRA has no cap on tasks per card",
    )


def test_keys_match_in_any_case_as_go_reads_them() -> None:
    text = json.dumps({"NodeConfig": [{"Name": "n1", "OperatingMode": "mig"}]})
    (entry,) = node_config_entries(text, "x")
    assert entry["name"] == "n1"
    assert entry_losses(entry, DEFAULT_POLICY)[0].startswith("operating mode mig:")


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ({"operatingmode": "mps"}, "operating mode mps: the DRA driver v0.1.0 offers only HAMi-core"),
        ({"devicememoryscaling": 1.5}, "deviceMemoryScaling 1.5 (the cluster's is 1)"),
        ({"devicecorescaling": 2}, "deviceCoreScaling 2: DRA's cores capacity is 100 per card"),
        ({"filterdevices": {"uuid": ["GPU-a"], "index": [3]}}, "cards hidden from HAMi (uuid GPU-a; index 3)"),
        ({"enablenumatopology": True}, "enableNumaTopology: no NUMA alignment under DRA"),
        ({"libcudaloglevel": 4}, "libCudaLogLevel 4: the webhook sets the cluster's (none) everywhere"),
        ({"preconfigureddevicememory": 122880}, "preConfiguredDeviceMemory 122880 MiB"),
    ],
)  # fmt: skip
def test_each_setting_names_what_is_lost(entry: dict[str, Any], said: str) -> None:
    (loss,) = entry_losses(entry, DEFAULT_POLICY)
    assert loss.startswith(said), loss


def test_a_scaling_the_cluster_config_shares_is_not_a_loss_of_the_node() -> None:
    policy = policy_from_mapping({"nvidia": {"deviceMemoryScaling": 1.5}}).policy
    assert entry_losses({"devicememoryscaling": 1.5}, policy) == ()


@pytest.mark.parametrize("text", ["{not json", '{"nodeconfig": {"name": "x"}}', "x" * (1 << 21)])
def test_an_unreadable_config_is_named(text: str) -> None:
    with pytest.raises(NodeConfigError) as error:
        node_config_entries(text, "ConfigMap hami/hami-device-plugin")
    assert str(error.value).startswith("ConfigMap hami/hami-device-plugin: ")


def test_node_losses_join_the_config_and_the_cordon_and_report_bad_configs() -> None:
    configs = [
        ("ConfigMap a/b", json.dumps({"nodeconfig": [{"name": "n1", "operatingmode": "mig"}]})),
        ("ConfigMap a/c", "{broken"),
    ]
    nodes = [
        {"metadata": {"name": "n1", "annotations": {"hami.io/device-cordon": "GPU-1"}}},
        {"metadata": {"name": "n2"}},
    ]
    losses, errors = node_losses(configs, nodes, DEFAULT_POLICY, rules_served=False)
    assert [n.node for n in losses] == ["n1"]
    assert losses[0].losses[1] == (
        "1 card(s) cordoned (hami.io/device-cordon): this cluster serves no DeviceTaintRule"
        " (Kubernetes 1.37+), so migrate node --to dra refuses to move it until it does or the"
        " annotation goes"
    )
    assert errors and errors[0].startswith("ConfigMap a/c: config.json is not JSON")


def test_the_config_map_is_the_one_mounted_at_config() -> None:
    daemonset = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"volumeMounts": [{"name": "a", "mountPath": "/device-config.yaml"}]},
                        {"volumeMounts": [{"name": "b", "mountPath": "/config"}]},
                    ],
                    "volumes": [
                        {"name": "a", "configMap": {"name": "hami-scheduler-device"}},
                        {"name": "b", "configMap": {"name": "my-external-config"}},
                    ],
                }
            }
        }
    }
    assert config_map_of(daemonset) == "my-external-config"
    assert config_map_of({}) == ""


def _node(value: str) -> dict[str, Any]:
    return {"metadata": {"name": "n", "annotations": {"hami.io/device-cordon": value}}}


def test_the_cordon_is_read_as_hami_reads_it() -> None:
    assert cordoned_uuids(_node(" GPU-a, ,GPU-b,GPU-a ,")) == ["GPU-a", "GPU-b"]
    assert cordoned_uuids(_node("  ")) == []
    assert cordoned_uuids({"metadata": {}}) == []
    with pytest.raises(CordonError):
        cordoned_uuids(_node(",".join(f"GPU-{i}" for i in range(300))))


def _slice(node: str, uuids: dict[str, str]) -> dict[str, Any]:
    driver = DEFAULT_POLICY.webhook.driver_name
    return {
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node},
            "devices": [
                {"name": name, "attributes": {"uuid": {"string": uuid}}}
                for name, uuid in uuids.items()
            ],
        }
    }


def test_a_plan_creates_what_is_missing_and_deletes_what_is_no_longer_cordoned() -> None:
    slices = [
        _slice("n", {"hami-gpu-0": "GPU-a", "hami-gpu-1": "GPU-b"}),
        _slice("m", {"hami-gpu-0": "GPU-c"}),
    ]
    plan = plan_cordons("n", ["GPU-a", "GPU-c"], slices, [], DEFAULT_POLICY)
    assert [r["spec"]["deviceSelector"]["device"] for r in plan.create] == ["hami-gpu-0"]
    assert plan.unknown == ["GPU-c"]  # another node's card is not this node's to cordon
    stored = json.loads(json.dumps(plan.create[0]))
    stored["spec"]["taint"]["timeAdded"] = "2026-12-07T00:00:00Z"  # what the server adds
    old = rule_for("n", "n", "hami-gpu-1", "GPU-b", DEFAULT_POLICY)
    again = plan_cordons("n", ["GPU-a"], slices, [stored, old], DEFAULT_POLICY)
    assert (again.create, again.replace, again.delete) == ([], [], [old["metadata"]["name"]])
    gone = plan_cordons("n", [], slices, [stored], DEFAULT_POLICY)
    assert gone.delete == [stored["metadata"]["name"]]


def test_a_long_node_name_is_a_label_value_by_its_hash() -> None:
    assert node_label_value("gpu-node-1") == "gpu-node-1"
    long = "a" * 100 + ".example.com"
    value = node_label_value(long)
    assert len(value) <= 63 and value.startswith("h-") and value == node_label_value(long)
