"""Kubernetes times written and read in one place (core/model/kube_time.py): the forms
kube-apiserver writes read back, anything else (a tenant's annotation) None, never an error."""

from __future__ import annotations

import pytest

from hami_dra_webhook.core.model import kube_time

MOMENT = 1796629093.25  # 2026-12-07T07:38:13Z and a quarter second


def test_written_as_kubernetes_writes_them() -> None:
    assert kube_time.stamp(MOMENT) == "2026-12-07T07:38:13Z"
    assert kube_time.micro_stamp(MOMENT) == "2026-12-07T07:38:13.250000Z"
    assert kube_time.seconds_of(kube_time.stamp(MOMENT)) == 1796629093.0
    assert kube_time.seconds_of(kube_time.micro_stamp(MOMENT)) == MOMENT


@pytest.mark.parametrize(
    "text",
    [
        "2026-12-07T07:38:13Z",
        "2026-12-07T07:38:13.000000Z",
        "2026-12-07T08:38:13+01:00",
    ],
)
def test_every_rfc3339_form_reads(text: str) -> None:
    assert kube_time.seconds_of(text) == 1796629093.0


@pytest.mark.parametrize(
    "text",
    [None, "", 0, 1796629093, "yesterday", "2026-12-07", "2026-12-07T07:38:13",  # no zone
     "2026-13-07T07:38:13Z", "2026-12-07 07:38:13Z", "2026-12-07T07:38:13Z" + "0" * 10_000],
)  # fmt: skip
def test_what_is_not_a_time_reads_as_none(text: object) -> None:
    assert kube_time.seconds_of(text) is None
    assert kube_time.age(text) is None


def test_age() -> None:
    assert kube_time.age("2026-12-07T07:38:13Z", now=1796629100.0) == 7.0
