"""A ResourceClaim read once into its view (core/model/claim_view.py): what kube-apiserver
returns read whole, and anything else (a tenant's claim, a shape the API would not hold) read
as less, never an error."""

from __future__ import annotations

from typing import Any

import pytest

from hami_dra_webhook.core.model.claim_view import (
    MAX_RESERVED_FOR,
    AllocatedDevice,
    ClaimView,
    Reservation,
)

DRIVER = "gpu.project-hami.io"
CLAIM = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {"name": "trainer-gpu-x", "namespace": "team", "uid": "c-1"},
    "spec": {"devices": {"requests": [{"name": "gpu"}]}},
    "status": {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "gpu",
                        "driver": DRIVER,
                        "pool": "node-1",
                        "device": "hami-gpu-0",
                        "consumedCapacity": {"memory": "3000Mi", "cores": "30"},
                    },
                    {"request": "nic", "driver": "nic.example.com", "pool": "p", "device": "d"},
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
                ]
            },
        },
        "reservedFor": [{"resource": "pods", "name": "trainer", "uid": "p-1"}],
    },
}  # fmt: skip


def test_a_claim_as_kube_apiserver_returns_it() -> None:
    view = ClaimView.of(CLAIM)
    assert (view.key, view.uid, view.allocated) == (("team", "trainer-gpu-x"), "c-1", True)
    (mine,) = view.results_of(DRIVER)
    assert mine == AllocatedDevice(
        "gpu", DRIVER, "node-1", "hami-gpu-0", (("memory", "3000Mi"), ("cores", "30")), True
    )
    assert mine.consumed_of("memory") == "3000Mi" and mine.consumed_of("gpus") is None
    assert not view.results_of("nic.example.com")[0].shares  # no consumedCapacity: exclusive
    assert view.reserved_for == (Reservation("pods", "trainer", "p-1"),)
    assert view.reserved_pod_uids == ("p-1",)
    assert view.node_names == frozenset({"node-1"})
    assert view.words() == "team/trainer-gpu-x (reserved for pod trainer)"


def test_an_unallocated_claim() -> None:
    view = ClaimView.of({"metadata": {"name": "c", "namespace": "n"}, "status": {}})
    assert not view.allocated and view.results == () and view.words() == "n/c"


@pytest.mark.parametrize(
    "claim",
    [
        None,
        "claim",
        [],
        {"metadata": "x", "status": []},
        {"status": {"allocation": {"devices": {"results": "all"}}}},
        {"status": {"allocation": {"devices": {"results": [1, None, "x"]}}}},
        {"status": {"allocation": {"devices": {"results": [{"driver": ["x"], "pool": {}}]}}}},
        {"status": {"reservedFor": {"resource": "pods"}}},
        {"status": {"allocation": {"nodeSelector": {"nodeSelectorTerms": [{"matchFields": 5}]}}}},
        {"status": {"allocation": {"devices": {"results": [{"consumedCapacity": [1]}]}}}},
    ],
)
def test_what_is_not_a_claim_reads_as_less(claim: Any) -> None:
    view = ClaimView.of(claim)
    assert view.results_of(DRIVER) == () and view.reserved_pod_uids == ()


def test_reservations_are_bounded_by_the_apis_limit() -> None:
    many = [{"resource": "pods", "name": f"p{i}", "uid": f"u{i}"} for i in range(10_000)]
    view = ClaimView.of({"metadata": {"name": "c"}, "status": {"reservedFor": many}})
    assert len(view.reserved_for) == MAX_RESERVED_FOR
