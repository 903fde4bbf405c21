"""Legacy HAMi v2.10 resolution rules (the README's translation table), as hand-computed expectations.

Each row: the container's limits, the `nvidia:` config, and what the claim must ask for per
device: (count, memory capacity or None for the whole device, cores). None as a whole = no claim.
"""

from __future__ import annotations

from typing import Any

import pytest

from hami_dra_webhook.core.review.wire import encode
from hami_dra_webhook.core.settings.policy import policy_from_mapping
from hami_dra_webhook.core.translate.pod import translate_pod

G, M, P, C = (
    "nvidia.com/gpu",
    "nvidia.com/gpumem",
    "nvidia.com/gpumem-percentage",
    "nvidia.com/gpucores",
)
SIZES_80 = {"deviceMemorySizes": ["80Gi"]}

ROWS: list[
    tuple[str, dict[str, str], dict[str, Any], dict[str, Any], tuple[int, str | None, str] | None]
] = [
    ("bare count is exclusive", {G: "1"}, {}, {}, (1, None, "100")),
    (
        "defaultMemory does not undo exclusivity",
        {G: "1"},
        {"defaultMemory": 3000},
        {},
        (1, "3000Mi", "100"),
    ),
    (
        "gpumem shares, cores from defaultCores",
        {G: "1", M: "3000"},
        {"defaultCores": 10},
        {},
        (1, "3000Mi", "10"),
    ),
    ("gpumem 0 still non-exclusive", {G: "1", M: "0"}, {}, {}, (1, None, "0")),
    (
        "gpumem 0 falls back to defaultMemory",
        {G: "1", M: "0"},
        {"defaultMemory": 2000},
        {},
        (1, "2000Mi", "0"),
    ),
    (
        "memoryFactor multiplies gpumem",
        {G: "1", M: "3"},
        {"memoryFactor": 1024},
        {},
        (1, "3Gi", "0"),
    ),
    (
        "memoryFactor leaves defaultMemory alone",
        {G: "1", C: "20"},
        {"memoryFactor": 1024, "defaultMemory": 5},
        {},
        (1, "5Mi", "20"),
    ),
    ("gpucores given wins", {G: "1", C: "0"}, {}, {}, (1, None, "0")),
    ("gpucores over 100 clamps", {G: "1", C: "101"}, {}, {}, (1, None, "100")),
    ("percentage 100 is exclusive", {G: "1", P: "100"}, {}, {}, (1, None, "100")),
    (
        "percentage 50 is shared",
        {G: "1", P: "50"},
        {"defaultCores": 5},
        SIZES_80,
        (1, "40Gi", "5"),
    ),
    # v2.10: gpumem-percentage 0 is present, like gpumem 0: not exclusive, memory falls through.
    ("percentage 0 is not exclusive", {G: "1", P: "0"}, {}, {}, (1, None, "0")),
    ("percentage 0 takes defaultCores", {G: "1", P: "0"}, {"defaultCores": 7}, {}, (1, None, "7")),
    (
        "percentage 0 takes defaultMemory",
        {G: "1", P: "0"},
        {"defaultMemory": 2000},
        {},
        (1, "2000Mi", "0"),
    ),
    ("percentage 0 alone defaults the count", {P: "0"}, {}, {}, (1, None, "0")),
    ("percentage 0 keeps gpucores", {G: "1", P: "0", C: "40"}, {}, {}, (1, None, "40")),
    (
        "percentage floors per MiB",
        {G: "1", P: "1"},
        {},
        {"deviceMemorySizes": ["15109Mi"]},
        (1, "151Mi", "0"),
    ),
    ("gpumem beats percentage", {G: "1", M: "100", P: "50"}, {}, SIZES_80, (1, "100Mi", "0")),
    ("percentage and gpucores", {G: "1", P: "25", C: "30"}, {}, SIZES_80, (1, "20Gi", "30")),
    ("count defaults from gpumem", {M: "1000"}, {}, {}, (1, "1000Mi", "0")),
    ("count defaults from gpucores", {C: "50"}, {"defaultGPUNum": 3}, {}, (3, None, "50")),
    ("count defaults from percentage", {P: "100"}, {}, {}, (1, None, "100")),
    ("defaultGPUNum 0 means no GPU", {M: "1000"}, {"defaultGPUNum": 0}, {}, None),
    ("count 0 means no GPU", {G: "0", M: "1000"}, {}, {}, None),
    ("count 2", {G: "2", M: "1000"}, {}, {}, (2, "1000Mi", "0")),
]


def claim_of(limits: dict[str, str], nvidia: dict[str, Any], webhook: dict[str, Any]) -> Any:
    policy = policy_from_mapping({"nvidia": nvidia, "hamiDraWebhook": webhook}).policy
    pod = {"spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}}
    result = translate_pod(pod, policy, "ns")
    assert result.outcome == "converted", result.message
    if not result.templates:
        return None
    requests = result.templates[0]["spec"]["spec"]["devices"]["requests"]
    exact = requests[0]["exactly"]
    capacity = exact["capacity"]["requests"]
    assert all(r["exactly"]["capacity"]["requests"] == capacity for r in requests)
    assert all(r["exactly"]["count"] == 1 for r in requests)
    return (len(requests), capacity.get("memory"), capacity["cores"])


@pytest.mark.parametrize(
    ("why", "limits", "nvidia", "webhook", "expected"), ROWS, ids=[r[0] for r in ROWS]
)
def test_legacy_resolution(
    why: str, limits: dict[str, str], nvidia: dict[str, Any], webhook: dict[str, Any], expected: Any
) -> None:
    assert claim_of(limits, nvidia, webhook) == expected, why


@pytest.mark.parametrize(
    ("limits", "fragment"),
    [
        ({G: "1", M: "16Gi"}, "gpumem is in MiB"),
        ({G: "1", M: "1.5"}, "not a whole number"),
        ({G: "-1"}, "negative"),
        ({G: "1e3"}, "at most 32"),
        ({G: "1", M: "3Gi"}, "binary unit suffix"),
        ({G: "1", C: "x"}, "not a Kubernetes quantity"),
        ({G: "1", P: "101"}, "above 100"),
        ({G: "33"}, "at most 32"),
        ({G: "1", "nvidia.com/priority": "0.5"}, "not a whole number"),
    ],
)
def test_refusals_name_container_resource_and_value(limits: dict[str, str], fragment: str) -> None:
    policy = policy_from_mapping({}).policy
    pod = {"spec": {"containers": [{"name": "trainer", "resources": {"limits": limits}}]}}
    result = translate_pod(pod, policy)
    assert result.outcome == "refused"
    assert result.code is not None and 400 <= result.code < 500
    assert result.message is not None
    assert '"trainer"' in result.message
    assert fragment in result.message
    bad = [k for k, v in limits.items() if k in result.message]
    assert bad, f"the message names no resource: {result.message}"


def test_request_only_values_are_read_from_requests() -> None:
    pod = {"spec": {"containers": [{"name": "c", "resources": {"requests": {G: "2", M: "700"}}}]}}
    result = translate_pod(pod, policy_from_mapping({}).policy)
    requests = result.templates[0]["spec"]["spec"]["devices"]["requests"]
    assert [r["exactly"]["capacity"]["requests"]["memory"] for r in requests] == ["700Mi", "700Mi"]
    assert any("only in requests" in w for w in result.warnings)


def test_warnings_are_whole_in_the_decision_and_cut_to_120_characters_on_the_wire() -> None:
    pod = {
        "metadata": {"annotations": {"hami.io/gpu-scheduler-policy": "x" * 500}},
        "spec": {
            "containers": [{"name": "n" * 63, "resources": {"limits": {G: "1", C: "999", M: "9"}}}]
        },
    }
    result = translate_pod(pod, policy_from_mapping({}).policy)
    assert any(len(w) > 120 for w in result.warnings), "the decision keeps whole warnings"
    sent = encode("uid", result)["response"]["warnings"]
    assert len(sent) == len(result.warnings)
    assert all(len(w) <= 120 for w in sent)
    assert [w[:117] for w in sent] == [w[:117] for w in result.warnings]
    assert all(
        w.endswith("...")
        for w, whole in zip(sent, result.warnings, strict=True)
        if len(whole) > 120
    )


@pytest.mark.parametrize(
    ("config", "memory", "refused"),
    [
        ({"memoryFactor": 4096}, "2147483647", False),  # 8 EiB - 4 MiB: still a quantity
        ({"memoryFactor": 4097}, "2147483647", True),
        ({"memoryFactor": 2**40}, "2", False),
        ({"memoryFactor": 2**42}, "2", True),
        ({"defaultMemory": 2**43 - 1}, None, False),
        ({"defaultMemory": 2**43}, None, True),
    ],
)
def test_memory_beyond_a_kubernetes_quantity_is_refused(
    config: dict[str, int], memory: str | None, refused: bool
) -> None:
    limits = {G: "1"} | ({M: memory} if memory else {})
    pod = {"spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}}
    result = translate_pod(pod, policy_from_mapping({"nvidia": config}).policy)
    assert (result.outcome == "refused") is refused
    if refused:
        assert result.code == 422 and "more than a Kubernetes quantity holds" in result.message


def test_containers_sharing_a_name_are_refused() -> None:
    gpu = {"resources": {"limits": {G: "1"}}}
    pod = {
        "spec": {
            "initContainers": [{"name": "x", **gpu}],
            "containers": [{"name": "y", **gpu}, {"name": "x"}],
        }
    }
    result = translate_pod(pod, policy_from_mapping({}).policy)
    assert result.outcome == "refused" and result.code == 422
    assert 'more than one container is named "x"' in result.message
    # A nameless or non-map container first does not end the check.
    odd = {"spec": {"containers": [{"name": 5}, "x", {"name": "y", **gpu}, {"name": "y"}]}}
    refused = translate_pod(odd, policy_from_mapping({}).policy)
    assert refused.outcome == "refused" and 'named "y"' in refused.message


def test_claim_naming_is_linear_in_the_containers() -> None:
    """Names that all reduce to one claim base ("a", "a_", "a__", ...) are named in linear
    time: each container's name is found with a bounded number of lookups."""
    from hami_dra_webhook.core.translate.claims import Taken, claim_name

    class Counting(Taken):
        lookups = 0

        def __contains__(self, name: object) -> bool:
            Counting.lookups += 1
            return super().__contains__(name)

    taken = Counting()
    names = [claim_name("a" + "_" * i, taken) for i in range(2000)]
    assert len(set(names)) == 2000 and names[:3] == ["a-gpu", "a-gpu-2", "a-gpu-3"]
    assert Counting.lookups <= 2 * 2000
