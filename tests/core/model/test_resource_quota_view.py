"""A ResourceQuota read once into its view (core/model/resource_quota_view.py): a quota as
kube-apiserver returns it read whole, anything else read as one that limits nothing; the GPU
quota limits (core/quota/gpu_quota.limits_of) are read through it."""

from __future__ import annotations

from typing import Any

import pytest

from hami_dra_webhook.core.model.resource_quota_view import ResourceQuotaView
from hami_dra_webhook.core.quota.gpu_quota import Limit, limits_of, quota_keys
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY

QUOTA = {
    "apiVersion": "v1",
    "kind": "ResourceQuota",
    "metadata": {"name": "gpu", "namespace": "team-a", "resourceVersion": "7"},
    "spec": {"hard": {"limits.nvidia.com/gpumem": "8k", "requests.nvidia.com/gpu": 2}},
    "status": {"used": {"limits.nvidia.com/gpumem": "3000"}},
}


def test_a_quota_as_kube_apiserver_returns_it() -> None:
    view = ResourceQuotaView.of(QUOTA)
    assert (view.name, view.namespace, view.where) == ("gpu", "team-a", "team-a/gpu")
    assert view.hard == {"limits.nvidia.com/gpumem": "8k", "requests.nvidia.com/gpu": "2"}


@pytest.mark.parametrize(
    "quota",
    [
        None,
        "quota",
        {"metadata": [], "spec": []},
        {"spec": {"hard": ["limits.nvidia.com/gpumem"]}},
        {"spec": {"hard": {"limits.nvidia.com/gpumem": {"value": 1}}}, "status": "used"},
        {"spec": {"hard": {"limits.nvidia.com/gpumem": True}}},
    ],
)
def test_what_is_not_a_quota_limits_nothing(quota: Any) -> None:
    view = ResourceQuotaView.of(quota)
    assert dict(view.hard) == {}
    assert limits_of([quota], quota_keys(DEFAULT_POLICY)) == []


def test_the_gpu_limits_are_read_through_the_view() -> None:
    limits = limits_of([QUOTA, None, {"metadata": {"name": 5}}], quota_keys(DEFAULT_POLICY))
    assert limits == [
        Limit("gpu", "limits.nvidia.com/gpumem", 8000),
        Limit("gpu", "requests.nvidia.com/gpu", 2),
    ]
