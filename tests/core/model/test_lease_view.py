"""A Lease read once into its view (core/model/lease_view.py): when it is free for a replica,
and a Lease of another shape (written by hand, say) read as expired, never an error."""

from __future__ import annotations

from typing import Any

import pytest

from hami_dra_webhook.core.model import kube_time
from hami_dra_webhook.core.model.lease_view import MAX_DURATION, LeaseView

NOW = 1796629093.0


def _lease(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "gpu-quota", "resourceVersion": "7"}, "spec": spec}


def test_a_held_lease_is_free_once_its_duration_has_passed() -> None:
    renewed = kube_time.micro_stamp(NOW - 5)
    view = LeaseView.of(_lease(holderIdentity="a", leaseDurationSeconds=15, renewTime=renewed,
                               leaseTransitions=3))  # fmt: skip
    assert (view.holder, view.duration, view.transitions, view.resource_version) == (
        "a",
        15,
        3,
        "7",
    )
    assert view.free_in("b", NOW) == pytest.approx(10.0)
    assert view.free_in("a", NOW) == 0.0  # its own
    assert view.free_in("b", NOW + 60) == 0.0
    assert LeaseView.of(_lease(holderIdentity="", leaseDurationSeconds=1)).free_in("b", NOW) == 0.0


@pytest.mark.parametrize(
    "lease",
    [
        None,
        {"spec": "held"},
        _lease(holderIdentity="a", leaseDurationSeconds="15", renewTime="now"),
        _lease(holderIdentity="a", leaseDurationSeconds=True, renewTime=["x"]),
        _lease(holderIdentity="a", leaseDurationSeconds=15, renewTime="2026-13-40T00:00:00Z"),
    ],
)
def test_a_lease_of_another_shape_reads_as_expired(lease: Any) -> None:
    assert LeaseView.of(lease).free_in("b", NOW) == 0.0


def test_a_duration_is_bounded() -> None:
    view = LeaseView.of(_lease(holderIdentity="a", leaseDurationSeconds=10**9,
                               renewTime=kube_time.micro_stamp(NOW)))  # fmt: skip
    assert view.duration == MAX_DURATION and view.free_in("b", NOW) == MAX_DURATION
