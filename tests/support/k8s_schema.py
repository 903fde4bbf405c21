"""Validation against the OpenAPI (Swagger 2.0) documents that the real kube-apiserver of each
version serves at /openapi/v2, fetched once from the control plane the tests build
(tests/controlplane) and cached beside its binaries.

Unknown fields are errors here, as with kube-apiserver's strict field validation.
"""

from __future__ import annotations

import copy
import fcntl
import functools
import json
import tempfile
from pathlib import Path
from typing import Any

import jsonschema

from tests.controlplane.build import GoMissing, build, cache_root
from tests.controlplane.cluster import ControlPlane
from tests.controlplane.versions import release

VERSIONS = ("1.34", "1.35", "1.36", "1.37")
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


def _cached(minor: str) -> Path:
    return cache_root() / f"openapi-v2-v{release(minor).version}.json"


def available() -> bool:
    """The documents are cached, or Go can build the servers that serve them."""
    if all(_cached(v).is_file() for v in VERSIONS):
        return True
    try:
        from tests.controlplane.build import go

        go()
    except GoMissing:
        return False
    return True


SKIP_REASON = (
    "no Go toolchain to build the kube-apiservers whose /openapi/v2 the schema tests use,"
    " and no cached documents"
)


def _document(minor: str) -> dict[str, Any]:
    """/openapi/v2 of the real kube-apiserver `minor`, started once and then cached."""
    path = _cached(minor)
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        with (path.parent / f"{path.name}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not path.is_file():
                target = release(minor)
                with tempfile.TemporaryDirectory(prefix="openapi-") as folder:
                    plane = ControlPlane(
                        target, build(target), Path(folder), consumable_capacity=True,
                        controllers=False,
                    ).start()  # fmt: skip
                    try:
                        status, document = plane.request("GET", "/openapi/v2")
                    finally:
                        plane.stop()
                assert status == 200, f"/openapi/v2 of {target.version}: {status}"
                part = path.with_suffix(".part")
                part.write_text(json.dumps(document))
                part.replace(path)
    return dict(json.loads(path.read_text()))


@functools.cache
def _definitions(version: str) -> dict[str, Any]:
    definitions: dict[str, Any] = copy.deepcopy(_document(version)["definitions"])
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
