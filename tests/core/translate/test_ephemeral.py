"""Privileged ephemeral containers added to GPU pods (issue 11, finding 20), in the core."""

from __future__ import annotations

from typing import Any

import pytest

from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY, policy_from_mapping
from hami_dra_webhook.core.translate.ephemeral import holds_gpus, privileged_ephemeral

PRIVILEGED = {"name": "debugger", "securityContext": {"privileged": True}}


def _pod(labels: Any = None, claims: Any = None, ephemeral: Any = None) -> dict[str, Any]:
    pod: dict[str, Any] = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}
    if labels is not None:
        pod["metadata"]["labels"] = labels
    if claims is not None:
        pod["spec"]["resourceClaims"] = claims
    if ephemeral is not None:
        pod["spec"]["ephemeralContainers"] = ephemeral
    return pod


@pytest.mark.parametrize(
    ("pod", "held"),
    [
        (_pod(labels={"hami.io/dra": "true"}), True),
        (_pod(labels={"hami.io/dra": "false"}), False),
        (_pod(labels={"other": "true"}), False),
        (_pod(labels="not a map"), False),
        (_pod(claims=[{"name": "g", "resourceClaimTemplateName": "hami-gpu-abc"}]), True),
        (_pod(claims=[{"name": "g", "resourceClaimTemplateName": "other-abc"}]), False),
        (_pod(claims=[{"name": "g", "resourceClaimName": "hami-gpu-abc"}]), False),
        (_pod(claims=[{"name": "g", "resourceClaimTemplateName": 7}]), False),
        (_pod(claims=["hami-gpu-abc"]), False),
        (_pod(claims="hami-gpu-abc"), False),
        (_pod(), False),
        ({"metadata": "x", "spec": "y"}, False),
        ("not a pod", False),
    ],
)
def test_a_gpu_pod_is_known_by_its_label_or_its_claims(pod: Any, held: bool) -> None:
    assert holds_gpus(pod, DEFAULT_POLICY) is held


def test_the_template_prefix_comes_from_the_policy() -> None:
    policy = policy_from_mapping({"hamiDraWebhook": {"templateNamePrefix": "gpu-"}}).policy
    pod = _pod(claims=[{"name": "g", "resourceClaimTemplateName": "gpu-abc"}])
    assert holds_gpus(pod, policy) and not holds_gpus(pod, DEFAULT_POLICY)


def test_a_new_privileged_ephemeral_container_is_refused() -> None:
    old = _pod(labels={"hami.io/dra": "true"})
    new = _pod(labels={"hami.io/dra": "true"}, ephemeral=[PRIVILEGED])
    refusal = privileged_ephemeral(new, old, DEFAULT_POLICY)
    assert refusal is not None
    assert (refusal.code, refusal.reason, refusal.warnings) == (403, "privileged-ephemeral", [])
    assert refusal.message == (
        "ephemeral container 'debugger' is privileged in a pod that holds GPUs: a privileged"
        " container sees every GPU on the node; debug without privileged (or set"
        " hamiDraWebhook.refusePrivileged: false)"
    )


def test_a_long_name_is_cut_in_the_message() -> None:
    container = {**PRIVILEGED, "name": "d" * 300}
    refusal = privileged_ephemeral(
        _pod(labels={"hami.io/dra": "true"}, ephemeral=[container]), None, DEFAULT_POLICY
    )
    assert refusal is not None and f"'{'d' * 63}'" in refusal.message
    assert "d" * 64 not in refusal.message


@pytest.mark.parametrize(
    ("new", "old", "policy"),
    [
        # Already there before this update: it was admitted then.
        (
            _pod(labels={"hami.io/dra": "true"}, ephemeral=[PRIVILEGED]),
            _pod(labels={"hami.io/dra": "true"}, ephemeral=[PRIVILEGED]),
            DEFAULT_POLICY,
        ),
        # Not a GPU pod.
        (_pod(ephemeral=[PRIVILEGED]), _pod(), DEFAULT_POLICY),
        # Not privileged, or not exactly true.
        (
            _pod(labels={"hami.io/dra": "true"}, ephemeral=[{"name": "d", "securityContext": {}}]),
            None,
            DEFAULT_POLICY,
        ),
        (
            _pod(
                labels={"hami.io/dra": "true"},
                ephemeral=[{"name": "d", "securityContext": {"privileged": "true"}}],
            ),
            None,
            DEFAULT_POLICY,
        ),
        (
            _pod(labels={"hami.io/dra": "true"}, ephemeral=[{"name": "d", "securityContext": "x"}]),
            None,
            DEFAULT_POLICY,
        ),
        # Entries that are not containers, and a list that is not one.
        (_pod(labels={"hami.io/dra": "true"}, ephemeral=["x", 3]), None, DEFAULT_POLICY),
        (_pod(labels={"hami.io/dra": "true"}, ephemeral="x"), None, DEFAULT_POLICY),
        # The policy allows privileged containers.
        (
            _pod(labels={"hami.io/dra": "true"}, ephemeral=[PRIVILEGED]),
            None,
            policy_from_mapping({"hamiDraWebhook": {"refusePrivileged": False}}).policy,
        ),
    ],
)
def test_what_is_let_through(new: Any, old: Any, policy: Any) -> None:
    assert privileged_ephemeral(new, old, policy) is None


def test_old_ephemeral_containers_that_are_not_maps_do_not_hide_new_ones() -> None:
    old = _pod(labels={"hami.io/dra": "true"}, ephemeral=["debugger"])
    new = _pod(labels={"hami.io/dra": "true"}, ephemeral=[PRIVILEGED])
    assert privileged_ephemeral(new, old, DEFAULT_POLICY) is not None
    old_not_pod = privileged_ephemeral(new, "not a pod", DEFAULT_POLICY)
    assert old_not_pod is not None


def test_a_privileged_one_after_ones_that_were_there_is_found() -> None:
    kept = {"name": "old-debugger", "securityContext": {"privileged": True}}
    old = _pod(labels={"hami.io/dra": "true"}, ephemeral=[kept])
    new = _pod(labels={"hami.io/dra": "true"}, ephemeral=["odd", kept, PRIVILEGED])
    refusal = privileged_ephemeral(new, old, DEFAULT_POLICY)
    assert refusal is not None and "'debugger'" in refusal.message
    assert privileged_ephemeral(old, old, DEFAULT_POLICY) is None
