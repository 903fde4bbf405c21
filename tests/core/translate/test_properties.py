"""Hypothesis properties of the translation: exact, idempotent, local, valid."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings

from hami_dra_webhook.core.outcome.decision import Converted, Refusal, Unchanged
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.translate.claims import CONVERTED_FROM_ANNOTATION, DRA_LABEL
from hami_dra_webhook.core.translate.pod import translate_pod
from tests.support import dra_limits, k8s_schema
from tests.support.cel_k8s import program
from tests.support.strategies import pods, policies, valid_gpu_pods, valid_policies

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def without_allowed_changes(pod: dict[str, Any], original: dict[str, Any], policy: Policy) -> Any:
    """`pod` with only the fields a translation may change put back as in `original`."""
    pod = copy.deepcopy(pod)
    metadata = pod.get("metadata", {})
    labels = metadata.get("labels", {})
    labels.pop(DRA_LABEL, None)
    if not labels and "labels" not in original.get("metadata", {}):
        metadata.pop("labels", None)
    annotations = metadata.get("annotations", {})
    annotations.pop(CONVERTED_FROM_ANNOTATION, None)
    if not annotations and "annotations" not in original.get("metadata", {}):
        metadata.pop("annotations", None)
    if not metadata and "metadata" not in original:
        pod.pop("metadata", None)
    spec, before = pod["spec"], original["spec"]
    for key in ("resourceClaims",):
        if key in before:
            spec[key] = spec[key][: len(before[key])]
        else:
            spec.pop(key, None)
    if before.get("schedulerName") == policy.webhook.legacy_scheduler_name:
        spec["schedulerName"] = before["schedulerName"]
    for list_name in ("initContainers", "containers"):
        for now, then in zip(spec.get(list_name, []), before.get(list_name, []), strict=True):
            for key in ("env",):
                if key in then:
                    now[key] = now[key][: len(then[key])]
                else:
                    now.pop(key, None)
            res, res_before = now.get("resources", {}), then.get("resources", {})
            for key in ("limits", "requests"):
                if key in res_before:
                    res[key] = {**res.get(key, {}), **res_before[key]}
            if "claims" in res_before:
                res["claims"] = res["claims"][: len(res_before["claims"])]
            else:
                res.pop("claims", None)
    return pod


@SETTINGS
@given(pod=valid_gpu_pods(), policy=valid_policies())
def test_every_valid_gpu_pod_converts(pod: dict[str, Any], policy: Policy) -> None:
    """No refusal is an acceptable answer for a pod legacy HAMi would place: labels, annotations,
    requests equal to limits, a legacy scheduler name, percentages with known sizes."""
    result = translate_pod(pod, policy, "team-a")
    assert result.outcome == "converted", (result.code, result.message)
    converted = result.apply(pod)
    assert converted["metadata"]["labels"][DRA_LABEL] == "true"
    claimed = {c["name"] for c in converted["spec"]["resourceClaims"]}
    assert {
        claim["name"]
        for c in converted["spec"]["containers"]
        for claim in c.get("resources", {}).get("claims", [])
    } <= claimed


@SETTINGS
@given(pod=pods(), policy=policies())
def test_translation_is_exact_idempotent_and_local(pod: dict[str, Any], policy: Policy) -> None:
    original = copy.deepcopy(pod)
    result = translate_pod(pod, policy, "team-a")
    assert pod == original, "the input pod was modified"
    if isinstance(result, Refusal):
        assert result.message and 400 <= result.code < 500
    if not isinstance(result, Converted):
        return
    converted = result.apply(pod)
    assert jsonpatch.apply_patch(pod, result.patch) == converted
    # No legacy key survives in any container.
    for list_name in ("initContainers", "containers"):
        for container in converted["spec"].get(list_name, []):
            res = container.get("resources", {})
            for key in policy.legacy_resource_names:
                assert key not in res.get("limits", {}) and key not in res.get("requests", {})
    # Everything not named by the rules is identical.
    assert without_allowed_changes(converted, original, policy) == original
    # Idempotent: the converted pod is left as it is.
    again = translate_pod(converted, policy, "team-a")
    assert isinstance(again, Unchanged) and again.left_alone is None
    # Every pod claim that points at one of ours points at an emitted template.
    names = {t["metadata"]["name"] for t in result.templates}
    ours = [
        c
        for c in converted["spec"].get("resourceClaims", [])
        if c not in original["spec"].get("resourceClaims", [])
    ]
    assert {c["resourceClaimTemplateName"] for c in ours} == names
    assert dra_limits.pod_problems(converted) == []
    for template in result.templates:
        assert dra_limits.template_problems(template) == []


@pytest.mark.skipif(not k8s_schema.available(), reason=k8s_schema.SKIP_REASON)
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pod=pods(allow_bad=False), policy=policies())
def test_generated_objects_validate_against_kubernetes(pod: dict[str, Any], policy: Policy) -> None:
    assert k8s_schema.errors(pod) == [], "the generator made an invalid input pod"
    result = translate_pod(pod, policy, "team-a")
    if result.outcome != "converted":
        return
    assert k8s_schema.errors(result.apply(pod)) == []
    for template in result.templates:
        assert k8s_schema.errors(template) == []
        for request in template["spec"]["spec"]["devices"]["requests"]:
            for exact in (
                [request["exactly"]] if "exactly" in request else request["firstAvailable"]
            ):
                for selector in exact["selectors"]:
                    program(selector["cel"]["expression"])  # compiles as CEL
