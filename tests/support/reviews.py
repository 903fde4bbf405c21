"""AdmissionReview payloads shaped as kube-apiserver sends them."""

from __future__ import annotations

import uuid
from typing import Any


def replica_pod(limits: dict[str, str] | None = None, **metadata: Any) -> dict[str, Any]:
    """A pod as a ReplicaSet creates it: generateName, no name and no uid yet."""
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "generateName": "trainer-7d9f8c6b5-",
            "namespace": "team-a",
            "labels": {"app": "trainer"},
            **metadata,
        },
        "spec": {
            "containers": [
                {
                    "name": "cuda",
                    "image": "nvidia/cuda:12.4.0-base-ubuntu22.04",
                    "resources": {
                        "limits": limits
                        or {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000", "cpu": "1"}
                    },
                    "terminationMessagePath": "/dev/termination-log",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Always",
            "schedulerName": "default-scheduler",
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
            ],
        },
        "status": {},
    }


def review(
    obj: dict[str, Any] | None,
    operation: str = "CREATE",
    old: dict[str, Any] | None = None,
    dry_run: bool = False,
    kind: str = "Pod",
    group: str = "",
    resource: str = "pods",
    namespace: str = "team-a",
) -> dict[str, Any]:
    gvk = {"group": group, "version": "v1", "kind": kind}
    gvr = {"group": group, "version": "v1", "resource": resource}
    return {
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": (obj or {}).get("metadata", {}).get("name", ""),
            "namespace": namespace,
            "operation": operation,
            "userInfo": {
                "username": "system:serviceaccount:kube-system:replicaset-controller",
                "groups": ["system:serviceaccounts", "system:authenticated"],
            },
            "object": obj,
            "oldObject": old,
            "dryRun": dry_run,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
            if operation == "CREATE"
            else None,
        },
    }
