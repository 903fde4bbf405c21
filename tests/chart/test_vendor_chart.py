"""The chart and the webhook read one deviceConfig the same way for the vendors beyond NVIDIA:
the pods of every family it converts reach the webhook, no others, and the DeviceClasses the
converted families need (and their drivers do not ship) are rendered."""

from __future__ import annotations

import re
import tempfile
from typing import Any

import pytest
import yaml

from hami_dra_webhook.core.settings.policy import policy_from_yaml
from hami_dra_webhook.core.vendors.families import families
from tests.support.chart_tools import CHART, run_helm
from tests.support.policies import EVERY_VENDOR

ALL_VENDORS = EVERY_VENDOR
RENAMED = """\
hygon:
  resourceCountName: example.com/dcu
  resourceMemoryName: example.com/dcu-mem
vnpus:
  hamiVnpuCore: true
  configs:
  - {chipName: 310P3, commonWord: Ascend310P, resourceName: huawei.com/Ascend310P,
     resourceMemoryName: huawei.com/Ascend310P-memory, memoryAllocatable: 21527,
     memoryCapacity: 24576}
awsneuron:
  resourceCountName: aws.amazon.com/neurondevice
hamiDraWebhook:
  vendors:
    hygon: {convert: true}
    ascend: {convert: true}
    awsNeuron: {convert: true}
"""


def _rendered(device_config: str, *sets: str) -> list[dict[str, Any]]:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as values:
        yaml.safe_dump({"deviceConfig": device_config}, values)
        values.flush()
        args = ["template", "x", str(CHART), "-f", values.name]
        for item in sets:
            args += ["--set", item]
        result = run_helm(*args)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def _names_sent(documents: list[dict[str, Any]]) -> set[str]:
    (config,) = [d for d in documents if d["kind"] == "MutatingWebhookConfiguration"]
    expression = config["webhooks"][0]["matchConditions"][0]["expression"]
    first_list = re.search(r"\[([^\]]*)\]\.exists", expression)
    assert first_list is not None, expression
    return {name.strip().strip("'") for name in first_list.group(1).split(",")}


@pytest.mark.parametrize(
    "device_config",
    [
        "nvidia: {}\n",
        ALL_VENDORS,
        RENAMED,
        "hamiDraWebhook:\n  vendors:\n    amd: {convert: true}\n",
    ],
    ids=["nvidia-only", "all-vendors", "renamed", "amd-only"],
)
def test_match_conditions_send_exactly_the_converted_families(device_config: str) -> None:
    policy = policy_from_yaml(device_config).policy
    assert _names_sent(_rendered(device_config)) == set(families(policy).converted_names())


def test_a_family_not_converted_is_not_sent() -> None:
    """The names the condition looks for (its evaluation is the same expression the NVIDIA
    tests evaluate with cel-python; kube-apiserver accepts it, tests/e2e/test_vendors.py)."""
    sent = _names_sent(_rendered(ALL_VENDORS))
    assert {"hygon.com/dcunum", "hygon.com/hcucores", "huawei.com/Ascend910B3-memory"} <= sent
    assert {"aws.amazon.com/neuron", "amd.com/gpu", "nvidia.com/gpu"} <= sent
    assert not any(n.startswith(("cambricon.com/", "enflame.com/")) for n in sent)
    assert not any(n.startswith("hygon.com/") for n in _names_sent(_rendered("nvidia: {}\n")))


def test_vendor_device_classes_only_where_the_driver_ships_none() -> None:
    classes = {
        d["metadata"]["name"]: d["spec"]["selectors"][0]["cel"]["expression"]
        for d in _rendered(ALL_VENDORS)
        if d["kind"] == "DeviceClass"
    }
    # NVIDIA's (the default) and Ascend's: the Ascend driver's chart does not create its class
    assert set(classes) == {"hami-core-gpu.project-hami.io", "hami-vnpu-core.project-hami.io"}
    assert classes["hami-vnpu-core.project-hami.io"] == (
        'device.driver == "ascend.project-hami.io" &&'
        ' device.attributes["ascend.project-hami.io"].type == "HAMivNPUCore"'
    )
    policy = policy_from_yaml(ALL_VENDORS).policy
    assert (
        classes["hami-vnpu-core.project-hami.io"] == families(policy).get("ascend").class_expression
    )
    everything = {
        d["metadata"]["name"]: d["spec"]["selectors"][0]["cel"]["expression"]
        for d in _rendered(
            ALL_VENDORS,
            "deviceClass.vendors.hygon=true",
            "deviceClass.vendors.amd=true",
            "deviceClass.vendors.awsNeuron=true",
        )
        if d["kind"] == "DeviceClass"
    }
    for key in ("hygon", "amd", "aws-neuron"):
        family = families(policy).get(key)
        assert everything[family.device_class] == family.class_expression  # type: ignore[index]
    nothing = [d for d in _rendered("nvidia: {}\n") if d["kind"] == "DeviceClass"]
    assert [d["metadata"]["name"] for d in nothing] == ["hami-core-gpu.project-hami.io"]


def _quota_keys_held(documents: list[dict[str, Any]]) -> set[str]:
    (policy,) = [
        d
        for d in documents
        if d["kind"] == "ValidatingAdmissionPolicy" and d["metadata"]["name"].endswith("-gpu-quota")
    ]
    (keys,) = [v["expression"] for v in policy["spec"]["variables"] if v["name"] == "keys"]
    listed = re.search(r"k in \[([^\]]*)\]", keys)
    assert listed is not None, keys
    return {name.strip().strip("'") for name in listed.group(1).split(",")}


@pytest.mark.parametrize(
    "device_config",
    [
        "nvidia: {}\n",
        ALL_VENDORS,
        RENAMED,
        "hamiDraWebhook:\n  vendors:\n    amd: {convert: true}\n",
    ],
    ids=["nvidia-only", "all-vendors", "renamed", "amd-only"],
)
def test_the_quota_policy_holds_exactly_the_keys_the_webhook_keeps(device_config: str) -> None:
    """The ValidatingAdmissionPolicy refuses an ungated GPU pod where a quota names a key the
    webhook keeps: the same keys (core/quota/gpu_quota.quota_keys), or a pod would be refused that
    the webhook never labels its namespace for, or go unheld where it does."""
    from hami_dra_webhook.core.quota.gpu_quota import quota_keys

    policy = policy_from_yaml(device_config).policy
    assert _quota_keys_held(_rendered(device_config)) == set(quota_keys(policy))
