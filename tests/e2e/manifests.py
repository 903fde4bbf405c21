"""Legacy HAMi manifests as users write them, for the end-to-end tests."""

from __future__ import annotations

from typing import Any

IMAGE = "registry.k8s.io/pause:3.10"


def gpu_pod(
    name: str,
    limits: dict[str, Any],
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "containers": [{"name": "cuda", "image": IMAGE, "resources": {"limits": limits}}],
            **spec,
        },
    }


def plain_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": IMAGE}]},
    }
