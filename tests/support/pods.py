"""Pods as users write them with legacy HAMi resources, for the tests that create them in a real
cluster (end-to-end and on the node). The AdmissionReview-shaped pod, as a ReplicaSet creates
it, is tests/support/reviews.replica_pod."""

from __future__ import annotations

from typing import Any

IMAGE = "registry.k8s.io/pause:3.10"
UBUNTU = "docker.io/library/ubuntu:22.04"  # the node tests' image: a shell, and env


def gpu_pod(
    name: str,
    limits: dict[str, Any],
    annotations: dict[str, str] | None = None,
    *,
    image: str = IMAGE,
    command: list[str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """One container, "cuda", asking for `limits`; `spec` adds to the pod's spec."""
    metadata: dict[str, Any] = {"name": name}
    if annotations:
        metadata["annotations"] = annotations
    container: dict[str, Any] = {"name": "cuda", "image": image, "resources": {"limits": limits}}
    if command is not None:
        container["command"] = command
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": [container], **spec},
    }


def plain_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": IMAGE}]},
    }
