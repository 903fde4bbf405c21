"""ResourceClaimTemplates for one container's GPU share, content-addressed by their content."""

from __future__ import annotations

import functools
import hashlib
import json
import re

from hami_dra_webhook.core import cel
from hami_dra_webhook.core.legacy import GpuShare, LegacyRequest
from hami_dra_webhook.core.policy import Policy
from hami_dra_webhook.core.quantity import MIB, format_bytes, format_mib
from hami_dra_webhook.core.types import ContainerRef, JsonObject, NotConvertible
from hami_dra_webhook.core.vendors.ask import DeviceAsk, ask_devices

API_VERSION = "resource.k8s.io/v1"
KIND = "ResourceClaimTemplate"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "hami-dra-webhook"
DRA_LABEL = "hami.io/dra"
LEGACY_REQUEST_ANNOTATION = "hami.io/legacy-request"
MAX_SUBREQUESTS = 8
HASH_LENGTH = 16
DNS_LABEL_MAX = 63
_NOT_DNS_LABEL = re.compile(r"[^a-z0-9-]+")


def template_labels() -> dict[str, str]:
    return {MANAGED_BY_LABEL: MANAGED_BY, DRA_LABEL: "true"}


def legacy_record(request: LegacyRequest, policy: Policy) -> str:
    """The legacy request a template came from, e.g. `nvidia.com/gpu=1,nvidia.com/gpumem=8000`."""
    values = (request.count, request.memory, request.percentage, request.cores, request.priority)
    pairs = [
        f"{name}={value}"
        for name, value in zip(policy.legacy_resource_names, values, strict=True)
        if value is not None
    ]
    return ",".join(pairs)


def claim_template(
    share: GpuShare,
    selectors: tuple[str, ...],
    record: str,
    ref: ContainerRef,
    policy: Policy,
    namespace: str | None,
) -> JsonObject:
    """A ResourceClaimTemplate whose name is a hash of everything in it but its namespace.

    Its `spec` is shared between calls with the same content: treat it as read-only.
    """
    if share.percentage is not None:
        _check_sizes(share.percentage, ref, policy)
    name, body = _content(share, selectors, record, policy)
    metadata: JsonObject = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    metadata["labels"] = dict(body["metadata"]["labels"])
    metadata["annotations"] = dict(body["metadata"]["annotations"])
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": body["spec"]}


def ask_template(ask: DeviceAsk, record: str, policy: Policy, namespace: str | None) -> JsonObject:
    """The ResourceClaimTemplate of another family's device ask, named and labelled as NVIDIA's
    (the garbage collector and the ephemeral-container check know them by the same prefix)."""
    body: JsonObject = {
        "metadata": {
            "labels": template_labels(),
            "annotations": {LEGACY_REQUEST_ANNOTATION: record},
        },
        "spec": {
            "metadata": {"labels": template_labels()},
            "spec": {"devices": ask_devices(ask, policy.webhook.consumable_capacity)},
        },
    }
    metadata: JsonObject = {"name": policy.webhook.template_name_prefix + content_digest(body)}
    if namespace:
        metadata["namespace"] = namespace
    metadata |= body["metadata"]
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": body["spec"]}


@functools.lru_cache(maxsize=4096)
def _content(
    share: GpuShare, selectors: tuple[str, ...], record: str, policy: Policy
) -> tuple[str, JsonObject]:
    body: JsonObject = {
        "metadata": {
            "labels": template_labels(),
            "annotations": {LEGACY_REQUEST_ANNOTATION: record},
        },
        "spec": {
            "metadata": {"labels": template_labels()},
            "spec": {"devices": _devices(share, selectors, policy)},
        },
    }
    return policy.webhook.template_name_prefix + content_digest(body), body


def content_digest(body: JsonObject) -> str:
    """The hash a template's name ends in: of its labels, legacy-request annotation and spec."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(canonical).hexdigest()[:HASH_LENGTH]


def _check_sizes(percentage: int, ref: ContainerRef, policy: Policy) -> None:
    sizes = policy.webhook.device_memory_sizes
    name = policy.nvidia.resource_memory_percentage_name
    if not sizes:
        raise NotConvertible(
            f"{ref.label}: {name}={percentage} needs the cluster's GPU memory sizes;"
            " set hamiDraWebhook.deviceMemorySizes (e.g. [80Gi])",
            code=422,
            reason="no-memory-sizes",
        )
    if len(sizes) > MAX_SUBREQUESTS:
        raise NotConvertible(
            f"{ref.label}: {name} over {len(sizes)} GPU memory sizes needs more than"
            f" {MAX_SUBREQUESTS} DRA alternatives; use gpumem (MiB)",
            code=422,
        )


def _devices(share: GpuShare, selectors: tuple[str, ...], policy: Policy) -> JsonObject:
    names = ["gpu"] if share.count == 1 else [f"gpu-{i}" for i in range(share.count)]
    # Each request gets its own objects: shared ones would come out as YAML anchors.
    if share.percentage is None:
        requests = [
            {"name": name, "exactly": _exact(selectors, share.memory_mib, share.cores, policy)}
            for name in names
        ]
    else:
        requests = [
            {"name": name, **_per_size(share.percentage, selectors, share.cores, policy)}
            for name in names
        ]
    devices: JsonObject = {"requests": requests}
    if share.count > 1:
        # N single-device requests and one distinctAttribute: N different physical GPUs, as in
        # legacy HAMi, on every Kubernetes version (docs/kubernetes-facts.md: DRA's limits).
        distinct = f"{policy.webhook.driver_name}/{policy.webhook.attributes.uuid}"
        devices["constraints"] = [{"requests": names, "distinctAttribute": distinct}]
    return devices


def _exact(
    selectors: tuple[str, ...], memory_mib: int | None, cores: int, policy: Policy
) -> JsonObject:
    keys = policy.webhook.capacity_keys
    exact: JsonObject = {
        "deviceClassName": policy.webhook.device_class_name,
        "allocationMode": "ExactCount",
        "count": 1,
        "selectors": [{"cel": {"expression": expression}} for expression in selectors],
    }
    if policy.webhook.consumable_capacity:
        # Cores are always explicit: the driver's default is 100, which would make a share
        # exclusive.
        capacity = {keys.cores: str(cores)}
        if memory_mib is not None:
            capacity[keys.memory] = format_mib(memory_mib)
        exact["capacity"] = {"requests": capacity}
    return exact


def _per_size(
    percentage: int, selectors: tuple[str, ...], cores: int, policy: Policy
) -> JsonObject:
    """gpumem-percentage: memory depends on each device's size, so pin a size per alternative."""
    web = policy.webhook
    sizes = web.device_memory_sizes
    alternatives = []
    for size in sizes:
        quantity = format_bytes(size)
        pinned = (
            *selectors,
            cel.capacity_equals(web.driver_name, web.capacity_keys.memory, quantity),
        )
        memory_mib = max(1, (size // MIB) * percentage // 100)
        exact = _exact(pinned, memory_mib, cores, policy)
        alternatives.append({"name": f"mem-{quantity.lower()}", **exact})
    if len(alternatives) == 1:
        only = alternatives[0]
        del only["name"]
        return {"exactly": only}
    return {"firstAvailable": alternatives}


def claim_name(container_name: object, taken: Taken) -> str:
    """A DNS label for the pod's resourceClaims entry, unique among `taken`, from the container."""
    base = _NOT_DNS_LABEL.sub("-", str(container_name).lower()).strip("-") or "container"
    base = f"{base[: DNS_LABEL_MAX - 4].rstrip('-')}-gpu"
    candidate, serial = base, taken.serials.get(base, 1)
    while candidate in taken:
        serial += 1
        suffix = f"-{serial}"
        candidate = base[: DNS_LABEL_MAX - len(suffix)].rstrip("-") + suffix
    taken.serials[base] = serial  # the next container of this base starts here: linear
    taken.add(candidate)
    return candidate


class Taken(set[str]):
    """Claim names in use, and per base name the serial reached, so that naming many
    containers whose names reduce to one base takes linear time, not quadratic."""

    def __init__(self, names: set[str] | None = None) -> None:
        super().__init__(names or ())
        self.serials: dict[str, int] = {}
