"""Pods with DRA claims on the shared control plane's GPU node, placed by the real
kube-scheduler (the node has no kubelet: the pods stay Pending, bound, their claims allocated
and reserved), for the node monitor's tests."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.cluster import Cluster, wait_for

DRIVER = "hami-core-gpu.project-hami.io"
CLASS = "monitor-test.hami.example"


@pytest.fixture(scope="module")
def device_class(kube: Cluster) -> Iterator[str]:
    kube.kubectl(
        "apply", "-f", "-",
        stdin=json.dumps({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": CLASS},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        }),
    )  # fmt: skip
    yield CLASS
    kube.kubectl("delete", "deviceclass", CLASS, "--ignore-not-found")


def claim(kube: Cluster, namespace: str, name: str, gpu_uuid: str) -> None:
    selector = f'device.attributes["{DRIVER}"].uuid == "{gpu_uuid}"'
    kube.kubectl(
        "apply", "-n", namespace, "-f", "-",
        stdin=json.dumps({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": CLASS,
                "selectors": [{"cel": {"expression": selector}}],
                "capacity": {"requests": {"memory": "1Gi", "cores": "10"}},
            }}]}},
        }),
    )  # fmt: skip


def gpu_pod(
    kube: Cluster, namespace: str, name: str, claim: str, containers: tuple[str, ...]
) -> str:
    kube.kubectl(
        "apply", "-n", namespace, "-f", "-",
        stdin=json.dumps({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {
                "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
                "containers": [
                    {"name": c, "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}
                    for c in containers
                ],
            },
        }),
    )  # fmt: skip
    wait_for(
        lambda: kube.get("pod", name, "-n", namespace)["spec"].get("nodeName"),
        f"kube-scheduler to place {name}",
    )
    claimed = wait_for(
        lambda: reserved(kube.get("resourceclaim", claim, "-n", namespace)),
        f"the claim {claim} allocated and reserved",
    )
    return str(claimed["metadata"]["uid"])


def reserved(claim: dict[str, Any]) -> dict[str, Any] | None:
    return claim if claim.get("status", {}).get("reservedFor") else None


@pytest.fixture
def gpu_namespace(kube: Cluster) -> Iterator[str]:
    """A namespace of the test's own; after it, its pods and claims deleted, so that the
    shared node's cards are whole again for the next test."""
    name = kube.create_namespace("monitor")
    yield name
    kube.kubectl("delete", "pods", "--all", "-n", name, "--grace-period=0", "--force")
    kube.kubectl("delete", "resourceclaims", "--all", "-n", name, "--wait=false")
    kube.release_namespace(name)
