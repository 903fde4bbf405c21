"""The benchmark's AdmissionReview mix: realistic pods of 8-20 KB, as kube-apiserver sends them."""

from __future__ import annotations

import copy
import json
import uuid
from typing import Any

from tests.support.reviews import review


def _container(name: str, index: int, limits: dict[str, str], env: int = 40) -> dict[str, Any]:
    return {
        "name": name,
        "image": f"registry.example.com/ml/{name}:v1.4.{index}",
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/sh", "-c"],
        "args": [
            f"exec /app/bin/{name} --port=80{index}0 --metrics-addr=:90{index}0 --log-level=info"
        ],
        "ports": [
            {"name": "http", "containerPort": 8000 + index, "protocol": "TCP"},
            {"name": "metrics", "containerPort": 9000 + index, "protocol": "TCP"},
        ],
        "env": [
            {"name": f"APP_SETTING_{j}", "value": f"value-{index}-{j}-xxxxxxxxxxxx"}
            for j in range(env)
        ]
        + [
            {
                "name": "POD_NAME",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
            }
        ],
        "resources": {
            "limits": {"cpu": "2", "memory": "8Gi", **limits},
            "requests": {"cpu": "500m", "memory": "2Gi"},
        },
        "volumeMounts": [
            {"name": "data", "mountPath": "/data"},
            {
                "name": "kube-api-access-x7k2p",
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                "readOnly": True,
            },
        ],
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": 8000 + index, "scheme": "HTTP"},
            "periodSeconds": 10,
            "timeoutSeconds": 1,
            "successThreshold": 1,
            "failureThreshold": 3,
        },
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": 8000 + index, "scheme": "HTTP"},
            "periodSeconds": 5,
            "timeoutSeconds": 1,
            "successThreshold": 1,
            "failureThreshold": 3,
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }


def _pod(
    containers: list[dict[str, Any]],
    annotations: dict[str, str] | None = None,
    generate: bool = False,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "namespace": "ml",
        "labels": {
            "app.kubernetes.io/name": "trainer",
            "app.kubernetes.io/instance": "trainer-prod",
            "team": "ml",
            "pod-template-hash": "7d9f8c6b5",
        },
        "annotations": {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": "9000",
            **(annotations or {}),
        },
    }
    if generate:
        metadata["generateName"] = "trainer-7d9f8c6b5-"
        metadata["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "trainer-7d9f8c6b5",
                "uid": str(uuid.UUID(int=2)),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    else:
        metadata["name"] = "trainer-0"
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": metadata,
        "spec": {
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "trainer-data"}},
                {
                    "name": "kube-api-access-x7k2p",
                    "projected": {
                        "defaultMode": 420,
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {
                                "configMap": {
                                    "name": "kube-root-ca.crt",
                                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                }
                            },
                        ],
                    },
                },
            ],
            "containers": containers,
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "trainer",
            "securityContext": {"fsGroup": 2000, "seccompProfile": {"type": "RuntimeDefault"}},
            "schedulerName": "default-scheduler",
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            ],
            "priority": 0,
            "enableServiceLinks": True,
        },
        "status": {},
    }


def _review(pod: dict[str, Any]) -> dict[str, Any]:
    return review(pod, namespace="ml")


GPU = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "8000", "nvidia.com/gpucores": "30"}


def mix() -> dict[str, dict[str, Any]]:
    """name -> AdmissionReview: no GPU; one GPU container; three with annotations; a Deployment pod."""
    return {
        "no-gpu": _review(_pod([_container("api", 0, {}), _container("sidecar", 1, {})])),
        "one-gpu": _review(_pod([_container("trainer", 0, GPU), _container("sidecar", 1, {})])),
        "three-annotated": _review(
            _pod(
                [
                    _container("trainer", 0, GPU),
                    _container("eval", 1, {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000"}),
                    _container("logger", 2, {}),
                ],
                annotations={
                    "nvidia.com/use-gputype": "A100,H100",
                    "nvidia.com/nouse-gpuuuid": "GPU-8f2e1c3a-0000-0000-0000-000000000000",
                },
            )
        ),
        "deployment-pod": _review(
            _pod(
                [
                    _container(
                        "server",
                        0,
                        {
                            "nvidia.com/gpu": "2",
                            "nvidia.com/gpumem": "16000",
                            "nvidia.com/gpucores": "50",
                        },
                        env=110,
                    )
                ],
                generate=True,
            )
        ),
    }


def encoded() -> dict[str, bytes]:
    return {
        name: json.dumps(document, separators=(",", ":")).encode()
        for name, document in mix().items()
    }


def pods() -> dict[str, dict[str, Any]]:
    return {name: copy.deepcopy(document["request"]["object"]) for name, document in mix().items()}
