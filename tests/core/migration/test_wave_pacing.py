"""core/migration/wave_pacing.py: when a wave's pods keep kube-controller-manager busy, and which pods
still wait for the claims of their templates (the real controller's side of it:
tests/cluster/test_wave_settle.py)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from hami_dra_webhook.core.migration.pool_plan import Step
from hami_dra_webhook.core.migration.wave_pacing import (
    PACING_WARN_SECONDS,
    awaiting_claims,
    claim_seconds,
    comes_back_converted,
    pacing_note,
)


def _step(goes: str, fits: bool = True) -> Step:
    return Step("n-1", "team", "p", "legacy", "ReplicaSet/r", goes, fits)


def test_only_pods_that_come_back_on_the_dra_side_count() -> None:
    assert comes_back_converted(_step("converted onto DRA node n-2"))
    assert comes_back_converted(_step("DRA node n-2 (its claims as allocated now)"))
    assert not comes_back_converted(
        _step("legacy node n-3 (not in the migration scope: stays legacy)")
    )
    assert not comes_back_converted(
        _step("nowhere: converted, no DRA node has free capacity for its claims", fits=False)
    )


def test_a_wave_is_flagged_once_its_pods_pass_the_threshold_at_the_default_qps() -> None:
    over = math.ceil(PACING_WARN_SECONDS * 20 / 2)  # the first count at 2 writes a pod, 20/s
    assert pacing_note([_step("converted onto DRA node n-2")] * (over - 1)) == ""
    note = pacing_note([_step("converted onto DRA node n-2")] * over)
    assert note.startswith(f"{over} evicted GPU pods come back converted"), note
    assert "--kube-api-qps" in note and "lower --batch" in note
    assert pacing_note([_step("legacy node n-3 (left unchanged by the webhook)")] * 1000) == ""
    assert claim_seconds(1000) == 100.0 and claim_seconds(1000, qps=200) == 10.0


def _pod(**parts: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "metadata": {"name": "p", "namespace": "team"},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "hami-gpu-x"}]},
        "status": {"phase": "Pending"},
    }
    for part, value in parts.items():
        pod[part] |= value
    return pod


@pytest.mark.parametrize(
    ("pod", "waits"),
    [
        (_pod(), True),
        (_pod(status={"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-1"}]}), False),
        (_pod(spec={"schedulingGates": [{"name": "hami.io/gpu-quota"}]}), False),
        (_pod(status={"phase": "Failed"}), False),
        (_pod(metadata={"name": "p", "deletionTimestamp": "2026-12-05T00:00:00Z"}), False),
        (_pod(spec={"resourceClaims": [{"name": "gpu", "resourceClaimName": "mine"}]}), False),
    ],
    ids=["no claim yet", "written", "gated", "ended", "ending", "own claim"],
)  # fmt: skip
def test_a_pod_waits_for_the_claims_of_its_templates_only(pod: dict[str, Any], waits: bool) -> None:
    assert awaiting_claims(pod) is waits
