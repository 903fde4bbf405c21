"""A Pod read once into its view (core/model/pod_view.py) for the quota pass and the moves:
a Pod as kube-apiserver returns it read whole (its claims named, made from templates, made by
kube-scheduler, or not made yet), anything else read as less, never as an error."""

from __future__ import annotations

from typing import Any

import pytest

from hami_dra_webhook.core.model.pod_view import PodView

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "train-0",
        "namespace": "team-a",
        "uid": "u-1",
        "resourceVersion": "42",
        "creationTimestamp": "2026-12-07T10:00:00Z",
        "labels": {"hami.io/gpu-quota": "held"},
    },
    "spec": {
        "nodeName": "gpu-1",
        "schedulingGates": [{"name": "other.io/gate"}, {"name": "hami.io/gpu-quota"}],
        "resourceClaims": [
            {"name": "own", "resourceClaimName": "shared-claim"},
            {"name": "gpu", "resourceClaimTemplateName": "train-gpu"},
            {"name": "none", "resourceClaimTemplateName": "not-needed"},
            {"name": "later", "resourceClaimTemplateName": "train-gpu"},
        ],
    },
    "status": {
        "phase": "Pending",
        "resourceClaimStatuses": [
            {"name": "gpu", "resourceClaimName": "train-0-gpu-x7k2"},
            {"name": "none"},  # made with no claim: none needed
        ],
        "extendedResourceClaimStatus": {"resourceClaimName": "train-0-extended-resources-q9"},
    },
}


def test_a_pod_as_kube_apiserver_returns_it() -> None:
    view = PodView.of(POD)
    assert (view.name, view.uid, view.resource_version) == ("train-0", "u-1", "42")
    assert view.created == "2026-12-07T10:00:00Z"
    assert view.labels == {"hami.io/gpu-quota": "held"} and not view.ended
    assert view.gate_index("hami.io/gpu-quota") == 1 and view.gate_index("absent") is None
    assert view.named_claims() == ["shared-claim"]
    names, missing = view.claim_names()
    assert names == ["shared-claim", "train-0-gpu-x7k2", "train-0-extended-resources-q9"]
    assert missing  # "later": its claim is not made yet


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_an_ended_pod(phase: str) -> None:
    assert PodView.of({"status": {"phase": phase}}).ended


@pytest.mark.parametrize(
    "pod",
    [
        None,
        [],
        "pod",
        {"metadata": [], "spec": "x", "status": 7},
        {"spec": {"resourceClaims": {"name": "gpu"}, "schedulingGates": "hami.io/gpu-quota"}},
        {"metadata": {"name": True, "labels": ["a"]}, "status": {"resourceClaimStatuses": [1]}},
    ],
    ids=["none", "list", "text", "fields-of-other-shapes", "lists-of-other-shapes", "a-flag"],
)
def test_anything_else_reads_as_less(pod: object) -> None:
    view = PodView.of(pod)
    assert view.name == "" and view.labels == {} and view.gate_index("hami.io/gpu-quota") is None
    assert view.claim_names() == ([], False) and view.named_claims() == []


def test_a_gate_keeps_its_place_among_entries_of_other_shapes() -> None:
    """The gate's index is where a JSON patch removes it: entries of another shape count."""
    pod = {"spec": {"schedulingGates": ["odd", {"name": "hami.io/gpu-quota"}]}}
    assert PodView.of(pod).gate_index("hami.io/gpu-quota") == 1


def test_its_state_as_the_moves_read_it() -> None:
    """What the canary and the pools read: phase, the Ready condition, the containers' states."""
    status = {
        "phase": "Running",
        "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "True"},
        ],
        "containerStatuses": [
            {"name": "a", "state": {"running": {"startedAt": "2026-12-07T10:00:00Z"}}},
            {"name": "b", "state": {"terminated": {"exitCode": 1, "message": "GPU=unset"}}},
            {"name": "c", "state": {"waiting": {"reason": "ImagePullBackOff"}}},
        ],
    }
    view = PodView.of({**POD, "status": status})
    assert (view.namespace, view.phase, view.ready, view.deleting) == (
        "team-a", "Running", True, False
    )  # fmt: skip
    assert view.condition("PodScheduled") == {"type": "PodScheduled", "status": "True"}
    assert view.condition("ContainersReady") == {}
    assert view.container_states("terminated") == [{"exitCode": 1, "message": "GPU=unset"}]
    assert view.container_states("waiting") == [{"reason": "ImagePullBackOff"}]
    going = {**POD, "metadata": {**POD["metadata"], "deletionTimestamp": "2026-12-07T11:00:00Z"}}
    assert PodView.of(going).deleting


@pytest.mark.parametrize(
    "status",
    [
        "Running",
        {"phase": ["Running"], "conditions": "Ready"},
        {"conditions": [None, "Ready", {"type": "Ready", "status": True}]},
        {"containerStatuses": [None, {"state": []}, {"state": {"terminated": "yes"}}]},
    ],
)
def test_a_state_of_other_shapes_reads_as_not_ready_and_nothing_said(status: object) -> None:
    view = PodView.of({**POD, "status": status})
    assert view.phase == "" and not view.ready and not view.ended
    assert view.condition("Ready") == {} or view.condition("Ready").get("status") is True
    assert view.container_states("terminated") == view.container_states("waiting") == []
