"""The policy: HAMi's device-config.yaml read unchanged, our section beside it, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY, PolicyError, policy_from_yaml
from hami_dra_webhook.core.vendors.families import families

EXAMPLE = Path(__file__).parents[3] / "examples" / "device-config.yaml"


def test_no_file_gives_working_defaults() -> None:
    n, w = DEFAULT_POLICY.nvidia, DEFAULT_POLICY.webhook
    assert DEFAULT_POLICY.legacy_resource_names == (
        "nvidia.com/gpu",
        "nvidia.com/gpumem",
        "nvidia.com/gpumem-percentage",
        "nvidia.com/gpucores",
        "nvidia.com/priority",
    )
    assert (n.default_memory, n.default_cores, n.default_gpu_num, n.memory_factor) == (0, 0, 1, 1)
    assert n.gpu_core_policy == "default"
    assert w.driver_name == w.device_class_name == "hami-core-gpu.project-hami.io"
    assert (w.capacity_keys.memory, w.capacity_keys.cores) == ("memory", "cores")
    assert (w.attributes.uuid, w.attributes.product_name, w.attributes.type) == (
        "uuid",
        "productName",
        "type",
    )
    assert w.device_type == "hami-gpu" and w.legacy_scheduler_name == "hami-scheduler"
    assert w.refuse_privileged is True and w.device_memory_sizes == ()
    assert policy_from_yaml("").policy == DEFAULT_POLICY


def test_hami_file_loads_unchanged_its_vendor_sections_read() -> None:
    loaded = policy_from_yaml(EXAMPLE.read_text())
    assert loaded.policy.nvidia.default_gpu_num == 1
    assert loaded.policy.webhook.device_memory_sizes == (80 << 30, 40 << 30)
    # HAMi's other vendor sections are read (names), not reported as unknown
    assert loaded.ignored_keys == () and loaded.warning is None
    assert families(loaded.policy).of("cambricon.com/vmlu").key == "cambricon"  # type: ignore[union-attr]
    assert "knownMigGeometries" in loaded.legacy_only_keys
    # Read now, for what DRA keeps of them (issue 64): the split count said, the scaling applied
    assert loaded.policy.nvidia.device_split_count == 10
    assert loaded.policy.nvidia.device_memory_scaling == 1


def test_a_section_hami_does_not_have_is_reported() -> None:
    loaded = policy_from_yaml("nvidia: {}\ngraphcore:\n  resourceCountName: x/ipu\n")
    assert loaded.ignored_keys == ("graphcore",)
    assert loaded.warning is not None and "graphcore" in loaded.warning


def test_unknown_keys_inside_sections_are_reported() -> None:
    loaded = policy_from_yaml("nvidia:\n  colour: red\nhamiDraWebhook:\n  colour: blue\n")
    assert loaded.ignored_keys == ("nvidia.colour", "hamiDraWebhook.colour")
    assert hash(loaded.policy) == hash(DEFAULT_POLICY) and loaded.policy == DEFAULT_POLICY


def test_a_bare_memory_size_is_mib_as_in_hami() -> None:
    policy = policy_from_yaml("hamiDraWebhook:\n  deviceMemorySizes: [81920, '40960', 24Gi]\n")
    assert policy.policy.webhook.device_memory_sizes == (80 << 30, 40 << 30, 24 << 30)


def test_an_empty_resource_name_means_that_resource_does_not_exist() -> None:
    """Legacy HAMi accepts `resourceMemoryName: ""`; so does serve, and nothing is gpumem."""
    policy = policy_from_yaml('nvidia:\n  resourceMemoryName: ""\n').policy
    assert policy.nvidia.resource_memory_name == ""
    assert "nvidia.com/gpumem" not in policy.legacy_resource_names


def test_renamed_resources_are_used() -> None:
    policy = policy_from_yaml("nvidia:\n  resourceCountName: example.com/vgpu\n").policy
    assert policy.legacy_resource_names[0] == "example.com/vgpu"


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("nvidia:\n  defaultMemory: lots\n", ["nvidia.defaultMemory", "'lots'"]),
        ("nvidia:\n  defaultCores: 101\n", ["nvidia.defaultCores", "100"]),
        ("nvidia:\n  gpuCorePolicy: always\n", ["nvidia.gpuCorePolicy", "'always'"]),
        ("nvidia:\n  memoryFactor: 0\n", ["nvidia.memoryFactor"]),
        ("nvidia: [1, 2]\n", ["nvidia", "dictionary"]),
        ("hamiDraWebhook:\n  deviceMemorySizes: [80Gb]\n", ["deviceMemorySizes", "80Gb"]),
        # A bare number is MiB; one that is more than any GPU has was meant as bytes.
        (
            "hamiDraWebhook:\n  deviceMemorySizes: [85899345920]\n",
            ["deviceMemorySizes", "85899345920", "MiB", "80Gi"],
        ),
        ("hamiDraWebhook:\n  templateNamePrefix: GPU_\n", ["templateNamePrefix", "lower-case"]),
        ("hamiDraWebhook:\n  driverName: Not A Domain\n", ["driverName", "DNS-1123"]),
        ("hamiDraWebhook:\n  attributes: {uuid: 'a-b'}\n", ["attributes.uuid", "CEL identifier"]),
        ("- just\n- a list\n", ["top level must be a map"]),
        ("nvidia: {\n", ["not valid YAML"]),
    ],
)
def test_wrong_types_are_clear_errors(text: str, fragments: list[str]) -> None:
    with pytest.raises(PolicyError) as raised:
        policy_from_yaml(text, "cm.yaml")
    message = str(raised.value)
    assert message.startswith("cm.yaml: ")
    for fragment in fragments:
        assert fragment in message
