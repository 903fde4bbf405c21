"""Validation against the real Kubernetes OpenAPI (Swagger 2.0) documents in ../shared.

Unknown fields are errors here, as with kube-apiserver's strict field validation.
"""

from __future__ import annotations

import copy
import functools
import json
import os
from pathlib import Path
from typing import Any

import jsonschema

VERSIONS = ("1.34", "1.35", "1.36")
SHARED = Path(os.environ.get("HAMI_SHARED_DIR", Path(__file__).resolve().parents[2] / "shared"))
OPENAPI_DIR = SHARED / "k8s-openapi"
DEFINITIONS = {
    "Pod": "io.k8s.api.core.v1.Pod",
    "PodTemplateSpec": "io.k8s.api.core.v1.PodTemplateSpec",
    "ResourceClaimTemplate": "io.k8s.api.resource.v1.ResourceClaimTemplate",
    "DeviceClass": "io.k8s.api.resource.v1.DeviceClass",
    "Deployment": "io.k8s.api.apps.v1.Deployment",
    "ReplicaSet": "io.k8s.api.apps.v1.ReplicaSet",
    "StatefulSet": "io.k8s.api.apps.v1.StatefulSet",
    "DaemonSet": "io.k8s.api.apps.v1.DaemonSet",
    "Job": "io.k8s.api.batch.v1.Job",
    "CronJob": "io.k8s.api.batch.v1.CronJob",
}


def available() -> bool:
    return all((OPENAPI_DIR / f"swagger-{v}.json").is_file() for v in VERSIONS)


SKIP_REASON = f"the Kubernetes OpenAPI documents are not at {OPENAPI_DIR} (../shared is absent)"


@functools.cache
def _definitions(version: str) -> dict[str, Any]:
    document = json.loads((OPENAPI_DIR / f"swagger-{version}.json").read_text())
    definitions: dict[str, Any] = copy.deepcopy(document["definitions"])
    for name, schema in definitions.items():
        if "properties" in schema and "additionalProperties" not in schema:
            schema["additionalProperties"] = False
        if name.endswith("util.intstr.IntOrString"):
            schema.pop("type", None)
            schema["type"] = ["string", "integer"]
        if name.endswith("api.resource.Quantity"):
            # Quantity's JSON decoder takes numbers as well as strings.
            schema["type"] = ["string", "number"]
    return definitions


@functools.cache
def _by_group_version_kind(version: str) -> dict[tuple[str, str], str]:
    """(apiVersion, kind) -> definition name, from the documents' x-kubernetes-group-version-kind."""
    found = {}
    for name, schema in _definitions(version).items():
        for gvk in schema.get("x-kubernetes-group-version-kind", []):
            api_version = f"{gvk['group']}/{gvk['version']}" if gvk["group"] else gvk["version"]
            found[(api_version, gvk["kind"])] = name
    return found


def knows(api_version: str, kind: str) -> bool:
    return all((api_version, kind) in _by_group_version_kind(v) for v in VERSIONS)


@functools.cache
def _validator(version: str, kind: str) -> jsonschema.protocols.Validator:
    name = DEFINITIONS.get(kind) or kind
    root = {"$ref": f"#/definitions/{name}", "definitions": _definitions(version)}
    return jsonschema.Draft4Validator(root)


def object_errors(document: dict[str, Any]) -> list[str]:
    """Validate any built-in object by its apiVersion and kind."""
    found = []
    for version in VERSIONS:
        name = _by_group_version_kind(version)[(document["apiVersion"], document["kind"])]
        for error in _validator(version, name).iter_errors(document):
            where = "/".join(str(p) for p in error.absolute_path)
            found.append(f"{version} {document['kind']} /{where}: {error.message[:200]}")
    return found


def errors(document: Any, kind: str | None = None) -> list[str]:
    """Every schema violation of `document` in each version, as readable lines."""
    kind = kind or document["kind"]
    found = []
    for version in VERSIONS:
        for error in _validator(version, kind).iter_errors(document):
            where = "/".join(str(p) for p in error.absolute_path)
            found.append(f"{version} {kind} /{where}: {error.message[:200]}")
    return found
