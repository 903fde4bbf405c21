"""Core behaviour that mutation testing (scripts/mutation) showed no other test pinned."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest

from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY, policy_from_mapping
from hami_dra_webhook.core.translate.reapply import strip_reapplied


def _pod(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers)}
    if init:
        spec["initContainers"] = list(init)
    return {"metadata": {"name": "p"}, "spec": spec}


def _container(name: str, **resources: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "image": "i", "resources": resources} if resources else {"name": name}


CONVERTED = _container("cuda", limits={"cpu": "1"}, claims=[{"name": "cuda-gpu"}])  # type: ignore[arg-type]


def test_reapplied_legacy_keys_go_and_nothing_else() -> None:
    old = _pod(CONVERTED, _container("side", limits={"cpu": "1"}))
    new = _pod(
        _container(
            "cuda",
            limits={"cpu": "1", "nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000"},
            requests={"nvidia.com/gpu": "1"},
            claims=[{"name": "cuda-gpu"}],  # type: ignore[arg-type]
        ),
        _container("side", limits={"cpu": "1"}),
    )
    ops = strip_reapplied(new, old, DEFAULT_POLICY)
    assert ops == [
        {"op": "remove", "path": "/spec/containers/0/resources/limits/nvidia.com~1gpu"},
        {"op": "remove", "path": "/spec/containers/0/resources/limits/nvidia.com~1gpumem"},
        {"op": "remove", "path": "/spec/containers/0/resources/requests"},
    ]
    stripped = jsonpatch.apply_patch(new, ops)
    assert stripped["spec"]["containers"] == old["spec"]["containers"]


def test_a_map_of_only_legacy_keys_goes_whole_and_init_containers_count() -> None:
    old = _pod(CONVERTED, init=(_container("warm"),))
    new = _pod(
        _container("cuda", limits={"nvidia.com/gpu": "1"}, claims=[{"name": "cuda-gpu"}]),  # type: ignore[arg-type]
        init=(_container("warm", limits={"nvidia.com/gpucores": "30"}),),
    )
    new["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
    old_limits = {"cpu": "1"}
    assert old["spec"]["containers"][0]["resources"]["limits"] == old_limits
    ops = strip_reapplied(new, old, DEFAULT_POLICY)
    # cuda had other limits before: only the key goes; warm had none: the whole map goes.
    assert ops == [
        {"op": "remove", "path": "/spec/initContainers/0/resources/limits"},
        {"op": "remove", "path": "/spec/containers/0/resources/limits/nvidia.com~1gpu"},
    ]


def test_keys_the_old_pod_had_are_not_removed() -> None:
    """An UPDATE of a pod the webhook left alone keeps its legacy keys (nothing was re-applied)."""
    legacy = _pod(_container("cuda", limits={"nvidia.com/gpu": "1"}))
    assert strip_reapplied(legacy, legacy, DEFAULT_POLICY) == []


def test_renamed_resources_and_odd_shapes() -> None:
    policy = policy_from_mapping({"nvidia": {"resourceCountName": "example.com/vgpu"}}).policy
    old = _pod(_container("cuda", limits={"cpu": "1"}))
    new = _pod(
        _container("cuda", limits={"cpu": "1", "example.com/vgpu": "1", "nvidia.com/gpu": "1"})
    )
    assert strip_reapplied(new, old, policy) == [
        {"op": "remove", "path": "/spec/containers/0/resources/limits/example.com~1vgpu"}
    ]
    for odd in (None, "x", {"spec": "x"}, {"spec": {"containers": ["x", 5]}}):
        assert strip_reapplied(odd, old, DEFAULT_POLICY) == []


@pytest.mark.parametrize("old", [None, "x", {"spec": "x"}, {"spec": {"containers": "x"}}])
def test_without_a_readable_old_pod_every_legacy_key_is_reapplied(old: Any) -> None:
    new = _pod(_container("cuda", limits={"cpu": "1", "nvidia.com/gpu": "1"}))
    assert strip_reapplied(new, old, DEFAULT_POLICY) == [
        {"op": "remove", "path": "/spec/containers/0/resources/limits/nvidia.com~1gpu"}
    ]


def test_reapply_skips_what_is_not_a_container() -> None:
    old = _pod(CONVERTED)
    new = {"spec": {"containers": ["x", _container("cuda", limits={"nvidia.com/gpu": "1"})]}}
    assert strip_reapplied(new, old, DEFAULT_POLICY) == [
        {"op": "remove", "path": "/spec/containers/1/resources/limits/nvidia.com~1gpu"}
    ]


# -- cel ----------------------------------------------------------------------------------------

from hami_dra_webhook.core.model import cel  # noqa: E402


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        ('a"b\\c', '"a\\"b\\\\c"'),
        ("\ue000", '"\\ue000"'),  # just past the surrogates: escaped, not refused
        ("\uffff", '"\\uffff"'),
        ("\U00010000", '"\\U00010000"'),
        ("é\n", '"\\u00e9\\u000a"'),
    ],
)
def test_cel_literals_are_written_exactly(value: str, literal: str) -> None:
    assert cel.string_literal(value) == literal


@pytest.mark.parametrize("code", [0xD800, 0xDBFF, 0xDC00, 0xDFFF])
def test_every_lone_surrogate_is_refused_by_name(code: int) -> None:
    with pytest.raises(cel.CelLiteralError) as raised:
        cel.string_literal("ok" + chr(code))
    assert str(raised.value) == f"the value holds an invalid character U+{code:04X}"


def test_capacity_pin_names_the_capacity() -> None:
    assert cel.capacity_equals("d.example.com", "memory", "80Gi") == (
        'device.capacity["d.example.com"].memory.compareTo(quantity("80Gi")) == 0'
    )


# -- patch --------------------------------------------------------------------------------------

from hami_dra_webhook.core.model import patch  # noqa: E402


def test_patch_replaces_the_root_removes_list_items_and_names_a_bad_path() -> None:
    document = {"a": [1, 2, 3]}
    assert patch.apply(document, [{"op": "add", "path": "", "value": {"b": 1}}]) == {"b": 1}
    ops: list[patch.PatchOp] = [{"op": "remove", "path": "/a/1"}]
    assert patch.apply(document, ops) == jsonpatch.apply_patch(document, ops) == {"a": [1, 3]}
    assert document == {"a": [1, 2, 3]}
    with pytest.raises(ValueError) as raised:
        patch.apply({"a": 1}, [{"op": "add", "path": "/a/b", "value": 2}])
    assert str(raised.value) == "patch path /a/b runs through a scalar"


# -- quantity -----------------------------------------------------------------------------------

from hami_dra_webhook.core.model.quantity import (  # noqa: E402
    QuantityError,
    parse_byte_size,
    parse_plain_integer,
)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (True, "is a boolean, not a number"),
        (0.5, "is not a whole number"),
        (-0.5, "is negative"),
        (-3, "is negative"),
        ("-3", "is negative"),
        ([1], "has type list, not a quantity string"),
        ("16Gi", "has a binary unit suffix (Gi); write a plain integer"),
        (1 << 31, "is larger than 2147483647, the largest value legacy HAMi reads"),
    ],
)
def test_quantity_reasons_are_exact(value: object, reason: str) -> None:
    with pytest.raises(QuantityError) as raised:
        parse_plain_integer(value)
    assert raised.value.reason == reason


def test_zero_written_as_a_decimal_is_zero() -> None:
    assert parse_plain_integer("0.0") == 0 and parse_plain_integer("0e3") == 0


def test_byte_sizes_are_positive() -> None:
    assert parse_byte_size("1") == 1
    for bad in ("0", "-1Gi", "0.5"):
        with pytest.raises(QuantityError) as raised:
            parse_byte_size(bad)
        assert raised.value.reason == "is not a positive whole number of bytes"


# -- policy -------------------------------------------------------------------------------------

from hami_dra_webhook.core.settings.policy import PolicyError, policy_from_yaml  # noqa: E402


def test_a_bare_size_of_exactly_1_tib_is_accepted_and_messages_are_exact() -> None:
    policy = policy_from_yaml("hamiDraWebhook:\n  deviceMemorySizes: [1048576]\n").policy
    assert policy.webhook.device_memory_sizes == (1 << 40,)
    with pytest.raises(PolicyError) as raised:
        policy_from_yaml("hamiDraWebhook:\n  deviceMemorySizes: [lots]\n")
    assert str(raised.value) == (
        "device-config.yaml: hamiDraWebhook.deviceMemorySizes: Value error, 'lots' is not a"
        " memory size such as 80Gi (got ['lots']); fix these keys or remove them to use defaults"
    )
    with pytest.raises(PolicyError) as raised:
        policy_from_yaml("hamiDraWebhook:\n  deviceMemorySizes: [1048577]\n")
    assert str(raised.value) == (
        "device-config.yaml: hamiDraWebhook.deviceMemorySizes: Value error, 1048577 MiB is more"
        " than any GPU has (a bare number is MiB, as in HAMi); write sizes with a unit, e.g."
        " 80Gi (got [1048577]); fix these keys or remove them to use defaults"
    )
    with pytest.raises(PolicyError) as raised:
        policy_from_mapping({"nvidia": {"defaultCores": 101}})
    assert str(raised.value).startswith("device-config.yaml: nvidia.defaultCores: ")


def test_several_problems_are_joined_and_name_their_section() -> None:
    with pytest.raises(PolicyError) as raised:
        policy_from_yaml("nvidia:\n  defaultMemory: x\n  defaultCores: y\n", "cm.yaml")
    assert str(raised.value) == (
        "cm.yaml: nvidia.defaultMemory: Input should be a valid integer, unable to parse string"
        " as an integer (got 'x'); nvidia.defaultCores: Input should be a valid integer, unable"
        " to parse string as an integer (got 'y'); fix these keys or remove them to use defaults"
    )


def test_unknown_keys_are_reported_with_their_full_path() -> None:
    text = (
        "nvidia:\n  bogus: 1\n  deviceSplitCount.x: 1\n  x.deviceSplitCount: 1\n"
        "  deviceSplitCount: 10\n  deviceCoreScaling: 1\n"
        "hamiDraWebhook:\n  extra: 1\n  capacityKeys: {memory: memory, odd: 1}\n"
        "  attributes: {uuid: uuid, weird: 2}\n"
    )
    loaded = policy_from_yaml(text)
    assert loaded.ignored_keys == (
        "nvidia.bogus",
        "nvidia.deviceSplitCount.x",
        "nvidia.x.deviceSplitCount",
        "hamiDraWebhook.extra",
        "hamiDraWebhook.capacityKeys.odd",
        "hamiDraWebhook.attributes.weird",
    )
    assert loaded.legacy_only_keys == ("deviceCoreScaling",)


# -- translate ----------------------------------------------------------------------------------

from hami_dra_webhook.core.legacy.request import resource_maps  # noqa: E402
from hami_dra_webhook.core.legacy.selectors import device_filter  # noqa: E402
from hami_dra_webhook.core.outcome.decision import Unchanged  # noqa: E402
from hami_dra_webhook.core.translate.claims import Taken, claim_name  # noqa: E402
from hami_dra_webhook.core.translate.pod import translate_pod  # noqa: E402

OVERWRITE = policy_from_mapping({"nvidia": {"overwriteEnv": True}}).policy
GPU = _container("cuda", limits={"nvidia.com/gpu": "1"})


def _env(result_pod: dict[str, Any], index: int) -> list[dict[str, str]]:
    return list(result_pod["spec"]["containers"][index].get("env", []))


@pytest.mark.parametrize("pod", [None, "x", [1], {"spec": "x"}, {"metadata": {}}])
def test_what_is_no_pod_is_unchanged(pod: Any) -> None:
    result = translate_pod(pod, DEFAULT_POLICY, "ns")
    assert result == Unchanged(warnings=[])


@pytest.mark.parametrize(
    ("pod", "message"),
    [
        ({"metadata": "x", "spec": {"containers": [GPU]}}, "pod metadata is not a map"),
        (
            {"spec": {"containers": [GPU], "resourceClaims": "x"}},
            "spec.resourceClaims is not a list",
        ),
    ],
)
def test_malformed_pods_are_400_with_what_is_wrong(pod: dict[str, Any], message: str) -> None:
    result = translate_pod(pod, DEFAULT_POLICY, "ns")
    assert (result.outcome, result.code, result.message) == ("refused", 400, message)


def test_a_refusal_keeps_its_reason_tag() -> None:
    pod = _pod(_container("cuda", limits={"nvidia.com/gpumem-percentage": "50"}))
    result = translate_pod(pod, DEFAULT_POLICY, "ns")
    assert (result.outcome, result.reason) == ("refused", "no-memory-sizes")


def test_the_resources_a_pod_used_are_listed_in_policy_order() -> None:
    pod = _pod(
        _container("a", limits={"nvidia.com/gpucores": "30", "nvidia.com/gpu": "1"}),
        _container("b", requests={"nvidia.com/gpumem": "100"}, limits={"nvidia.com/gpumem": "100"}),
    )
    result = translate_pod(pod, DEFAULT_POLICY, "ns")
    assert result.resources == ["nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores"]


def test_overwrite_env_hides_only_containers_without_devices_or_claims() -> None:
    user_claim = _container("nic", limits={"cpu": "1"})
    user_claim["resources"]["claims"] = [{"name": "nic"}]
    own = {"name": "own", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}
    same = {"name": "same", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}]}
    zero = _container("zero", limits={"nvidia.com/gpu": "0"})
    pod = _pod(GPU, user_claim, own, same, zero, {"name": "plain"})
    pod["spec"]["resourceClaims"] = [{"name": "nic", "resourceClaimName": "nic"}]
    result = translate_pod(pod, OVERWRITE, "ns")
    converted = result.apply(pod)
    assert _env(converted, 0) == []  # the GPU container
    assert _env(converted, 1) == []  # uses a claim
    assert _env(converted, 2) == own["env"]
    assert _env(converted, 3) == same["env"]
    hidden = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}]
    assert _env(converted, 4) == hidden  # count 0: no device
    assert _env(converted, 5) == hidden
    keeps = [w for w in result.warnings if "keeps its own" in w]
    assert keeps == ['container "own": keeps its own NVIDIA_VISIBLE_DEVICES (not set to none)']


def test_overwrite_env_on_a_pod_that_keeps_every_variable_says_so() -> None:
    own = {"name": "own", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}
    result = translate_pod(_pod(own), OVERWRITE, "ns")
    assert result.outcome == "unchanged"
    assert result.warnings == [
        'container "own": keeps its own NVIDIA_VISIBLE_DEVICES (not set to none)'
    ]
    opted_out = _pod({"name": "web"})
    opted_out["metadata"]["labels"] = {"hami.io/webhook": "ignore"}
    assert translate_pod(opted_out, OVERWRITE, "ns").warnings == []


def test_what_is_not_a_container_is_skipped_not_a_crash() -> None:
    pod = {"spec": {"containers": ["x", GPU, 5]}}
    for policy in (DEFAULT_POLICY, OVERWRITE):
        result = translate_pod(pod, policy, "ns")
        assert result.outcome == "converted"
        assert result.apply(pod)["spec"]["containers"][1]["resources"]["claims"]


def test_a_container_without_a_device_is_no_gpu_container() -> None:
    """defaultGPUNum 0 and gpumem alone: no device, so neither nodeName nor the legacy scheduler
    make it a GPU pod (the values go, with a warning)."""
    policy = policy_from_mapping({"nvidia": {"defaultGPUNum": 0}}).policy
    pod = _pod(_container("a", limits={"nvidia.com/gpumem": "100"}))
    pod["spec"] |= {"nodeName": "n1", "schedulerName": "hami-scheduler"}
    result = translate_pod(pod, policy, "ns")
    assert result.outcome == "converted"
    assert result.apply(pod)["spec"]["schedulerName"] == "hami-scheduler"


def test_log_level_and_a_label_already_in_place() -> None:
    policy = policy_from_mapping({"nvidia": {"libCudaLogLevel": 3}}).policy
    pod = _pod(GPU)
    pod["metadata"]["labels"] = {"hami.io/dra": "true"}
    result = translate_pod(pod, policy, "ns")
    converted = result.apply(pod)
    assert _env(converted, 0) == [{"name": "LIBCUDA_LOG_LEVEL", "value": "3"}]
    # the label is not added again; only the annotation of what the pod was converted from
    assert [op["path"] for op in result.patch if op["path"].startswith("/metadata")] == [
        "/metadata/annotations"
    ]


def test_a_pod_template_without_metadata_gets_the_label() -> None:
    template = {"spec": {"containers": [GPU]}}
    converted = translate_pod(template, DEFAULT_POLICY, "ns").apply(template)
    assert converted["metadata"] == {
        "labels": {"hami.io/dra": "true"},
        "annotations": {"hami.io/converted-from": "cuda: gpu=1"},
    }


def test_the_converted_from_annotation_is_short_and_bounded() -> None:
    from hami_dra_webhook.core.translate.claims import MAX_CONVERTED_FROM, converted_from

    pod = _pod(GPU)
    pod["metadata"]["annotations"] = {"team": "a"}
    converted = translate_pod(pod, DEFAULT_POLICY, "ns").apply(pod)
    assert converted["metadata"]["annotations"] == {
        "team": "a",
        "hami.io/converted-from": "cuda: gpu=1",
    }
    entries = [(f"c{i}", "nvidia.com/gpu=1,nvidia.com/gpumem=20000") for i in range(100)]
    text = converted_from(entries)
    assert len(text) <= MAX_CONVERTED_FROM
    assert text.startswith("c0: gpu=1,gpumem=20000; c1: gpu=1,gpumem=20000; ")
    shown = text.count("gpu=1,")
    assert text.endswith(f"; (+{100 - shown} more containers)"), text
    assert converted_from([("c", "x=" + "9" * 2000)]) == "(+1 more containers)"


def test_existing_claims_that_are_not_maps_are_kept() -> None:
    pod = {"spec": {"containers": [GPU], "resourceClaims": ["odd"]}}
    converted = translate_pod(pod, DEFAULT_POLICY, "ns").apply(pod)
    assert converted["spec"]["resourceClaims"][0] == "odd"
    assert converted["spec"]["resourceClaims"][1]["name"] == "cuda-gpu"


# -- claims -------------------------------------------------------------------------------------


def test_claim_names_trim_dashes_where_they_cut() -> None:
    assert claim_name("-Cuda_0-", Taken()) == "cuda-0-gpu"
    long = "a" * 58 + "-bbbb"  # cut after 59 characters: the dash at the cut goes
    assert claim_name(long, Taken()) == "a" * 58 + "-gpu"
    base = "a" * 59 + "zz"  # the claim base is its first 59 characters plus -gpu: 63
    taken = Taken()
    names = [claim_name(base, taken) for _ in range(10)]
    assert names[0] == "a" * 59 + "-gpu"
    assert names[1] == "a" * 59 + "-g-2"
    assert names[9] == "a" * 59 + "-10"  # the cut for "-10" lands on "-": it goes
    assert len(set(names)) == 10 and all(len(n) <= 63 for n in names)


def test_one_percent_of_a_small_card_is_at_least_1_mib() -> None:
    policy = policy_from_mapping({"hamiDraWebhook": {"deviceMemorySizes": ["50Mi"]}}).policy
    pod = _pod(_container("c", limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "1"}))
    [template] = translate_pod(pod, policy, "ns").templates
    request = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert request["capacity"]["requests"]["memory"] == "1Mi"


# -- selectors and legacy -----------------------------------------------------------------------


def test_annotation_values_that_are_not_strings_add_nothing() -> None:
    """An unhashable value (a list) takes the uncached path; it is no list of UUIDs."""
    found = device_filter({"nvidia.com/use-gpuuuid": ["GPU-1"]}, DEFAULT_POLICY)
    assert len(found.selectors) == 1  # the driver guard alone
    assert found.warnings == (
        "annotation nvidia.com/use-gpuuuid lists nothing, so it adds no constraint",
    )


def test_the_selector_limit_message_is_exact() -> None:
    with pytest.raises(Exception) as raised:
        device_filter({"nvidia.com/use-gputype": "x," * 2000}, DEFAULT_POLICY)
    assert str(raised.value) == (
        "GPU annotations make a CEL selector longer than the 10 KiB DRA allows;"
        " list fewer UUIDs or types"
    )


def test_resource_maps_of_what_is_not_a_container() -> None:
    assert resource_maps("x") == ({}, {})
    assert resource_maps({"resources": "x"}) == ({}, {})


def test_reapplied_keys_are_matched_to_the_old_container_by_name() -> None:
    """Two containers: only the one whose old self lacked the key loses it."""
    gpu = {"limits": {"nvidia.com/gpu": "1"}}
    old = {"spec": {"containers": [{"name": "a", "resources": gpu}, {"name": "b"}]}}
    new = {
        "spec": {"containers": [{"name": "a", "resources": gpu}, {"name": "b", "resources": gpu}]}
    }
    assert strip_reapplied(new, old, DEFAULT_POLICY) == [
        {"op": "remove", "path": "/spec/containers/1/resources/limits"}
    ]
    assert strip_reapplied(old, old, DEFAULT_POLICY) == []


def test_reapply_reads_only_string_names() -> None:
    gpu = {"limits": {"nvidia.com/gpu": "1"}}
    old = {"spec": {"containers": [{"name": ["a"], "resources": gpu}]}}
    new = {"spec": {"containers": [{"name": ["a"], "resources": gpu}], "initContainers": 3}}
    # Names that are not strings (unhashable here) are read as no name, and no name matches
    # no name: nothing re-applied, and no crash.
    assert strip_reapplied(new, old, DEFAULT_POLICY) == []


def test_reapplied_keys_of_a_converted_vendor_go_too() -> None:
    from hami_dra_webhook.core.settings.policy import policy_from_yaml

    hygon = policy_from_yaml("hamiDraWebhook: {vendors: {hygon: {convert: true}}}").policy
    old = _pod(CONVERTED)
    new = _pod(
        _container(
            "cuda",
            limits={"cpu": "1", "hygon.com/dcunum": "1"},
            claims=[{"name": "cuda-gpu"}],  # type: ignore[arg-type]
        )
    )
    removal = {"op": "remove", "path": "/spec/containers/0/resources/limits/hygon.com~1dcunum"}
    assert strip_reapplied(new, old, hygon) == [removal]
    assert strip_reapplied(new, old, DEFAULT_POLICY) == []  # not converted: not this webhook's


def test_the_converted_from_annotation_fills_exactly_to_its_bound() -> None:
    from hami_dra_webhook.core.translate.claims import MAX_CONVERTED_FROM, converted_from

    # One entry of exactly the bound fits whole; one character more does not.
    name = "c"
    filler = "x=" + "9" * (MAX_CONVERTED_FROM - len(f"{name}: x="))
    assert len(f"{name}: {filler}") == MAX_CONVERTED_FROM
    assert converted_from([(name, filler)]) == f"{name}: {filler}"
    assert converted_from([(name, filler + "9")]) == "(+1 more containers)"
    # With a second entry left, room is kept for "(+1 more containers)".
    more = "; (+2 more containers)"
    fits = "x=" + "9" * (MAX_CONVERTED_FROM - len(more) - len(f"{name}: x="))
    long = ("d", "y=" + "1" * 30)
    assert converted_from([(name, fits), long]) == f"{name}: {fits}; (+1 more containers)"
    assert converted_from([(name, fits + "9"), long]) == "(+2 more containers)"
