"""core/settings/policy.py's checks across sections: a vendor section HAMi would not read, a policy whose
whole-GPU setting cannot go with what it adds to GPU containers, and a policy with other webhook
settings."""

from __future__ import annotations

import pytest

from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY, PolicyError, policy_from_mapping

WHOLE = {"hamiDraWebhook": {"wholeGpusByExtendedResource": True}}


def test_a_wrong_vendor_section_names_where_and_what() -> None:
    with pytest.raises(PolicyError) as raised:
        policy_from_mapping({"hygon": {"memoryFactor": 0}}, "cm/device-config.yaml")
    assert str(raised.value) == (
        "cm/device-config.yaml: HAMi's vendor sections: hygon.memoryFactor: Input should be"
        " greater than or equal to 1 (got 0); fix them as HAMi's device-config.yaml has them, or"
        " remove them to use HAMi's defaults"
    )
    with pytest.raises(PolicyError) as raised:
        policy_from_mapping({"hygon": {"memoryFactor": 0, "resourceCountName": 3}}, "x.yaml")
    assert str(raised.value).startswith(
        "x.yaml: HAMi's vendor sections: hygon.resourceCountName: Input should be a valid"
        " string (got 3); hygon.memoryFactor: "
    )


@pytest.mark.parametrize(
    ("nvidia", "named"),
    [
        ({"overwriteEnv": True}, "nvidia.overwriteEnv"),
        ({"defaultMemory": 3000}, "nvidia.defaultMemory"),
        ({"runtimeClassName": "nvidia"}, "nvidia.runtimeClassName"),
        ({"gpuCorePolicy": "force"}, "nvidia.gpuCorePolicy"),
        ({"libCudaLogLevel": 0}, "nvidia.libCudaLogLevel"),
        (
            {"overwriteEnv": True, "libCudaLogLevel": 2},
            "nvidia.overwriteEnv, nvidia.libCudaLogLevel",
        ),
    ],
)
def test_whole_gpus_by_extended_resource_cannot_go_with_what_reaches_every_gpu_container(
    nvidia: dict[str, object], named: str
) -> None:
    with pytest.raises(PolicyError) as raised:
        policy_from_mapping({**WHOLE, "nvidia": nvidia}, "d.yaml")
    assert str(raised.value) == (
        "d.yaml: hamiDraWebhook.wholeGpusByExtendedResource leaves count-only pods to"
        f" kube-scheduler, which gives them whole GPUs, but {named} must reach them (the webhook"
        " would write them): turn one of the two off"
    )


def test_whole_gpus_by_extended_resource_alone_or_with_defaults_is_a_policy() -> None:
    loaded = policy_from_mapping(
        {**WHOLE, "nvidia": {"gpuCorePolicy": "default", "runtimeClassName": ""}}
    )
    assert loaded.policy.webhook.whole_gpus_by_extended_resource is True
    assert policy_from_mapping({"nvidia": {"overwriteEnv": True}}).policy.nvidia.overwrite_env


def test_with_webhook_keeps_the_rest() -> None:
    loaded = policy_from_mapping(
        {"nvidia": {"defaultMemory": 1000}, "hygon": {"memoryFactor": 2}}
    ).policy
    webhook = DEFAULT_POLICY.webhook.model_copy(update={"legacy_scheduler_name": "other"})
    changed = loaded.with_webhook(webhook)
    assert changed.webhook is webhook
    assert changed.nvidia == loaded.nvidia and changed.nvidia.default_memory == 1000
    assert changed.hami_vendors == loaded.hami_vendors
    assert changed.hami_vendors.hygon.memory_factor == 2
    assert changed is not loaded and changed != loaded
