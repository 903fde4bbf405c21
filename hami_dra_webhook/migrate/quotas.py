"""Quotas and queues that count legacy GPU resources: once pods are converted they carry none
of them, so these objects stop limiting anything. `scan` reports each, `convert` adds the DRA
form where one exists.

What DRA quota counts (kube-apiserver 1.34-1.37, `pkg/quota/v1/evaluator/core/
resource_claims.go`): ResourceClaims, and devices per DeviceClass
(`<class>.deviceclass.resource.k8s.io/devices`, a claim counting the devices it asks for). No
quota counts consumed capacity (GPU memory or cores) yet, so gpumem and gpucores quotas have no
DRA form. Kueue counts what pods request: its queues' nvidia.com/* quotas stop counting
converted pods; it counts claims only through its Configuration's deviceClassMappings, and
only those a Job's own pod template references (docs/migration.md).

Volcano v1.15's capacity plugin (with `capacity.DynamicResourceAllocationEnable` and
`capacity.DRAConsumableCapacityEnable`) counts a queue's claims as `deviceclass/<class>`
(devices), `memory.deviceclass/<class>` and `cores.deviceclass/<class>` (consumed capacity) in
`spec.capability`, `spec.deserved` and `spec.guarantee.resource` (Volcano's
docs/user-guide/how_to_use_dra_quota.md, release-1.15). A class named in a queue must list
every dimension its claims request, or a task never fits: the form has all three or none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hami_dra_webhook.core.model import patch
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.quota.gpu_quota import bare_quota_key, counts_converted, quota_keys
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.files.manifests import api_group

DEVICES_SUFFIX = ".deviceclass.resource.k8s.io/devices"
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_CONFIG_GROUP = "config.kueue.x-k8s.io"
VOLCANO_GROUP = "scheduling.volcano.sh"
# A Volcano Queue's resource maps, by JSON pointer.
VOLCANO_SECTIONS = (("spec", "capability"), ("spec", "deserved"), ("spec", "guarantee", "resource"))
NO_CAPACITY_QUOTA = (
    "no Kubernetes quota counts the GPU memory or cores DRA claims consume (1.37 counts claims"
    " and devices only)"
)


@dataclass
class QuotaReport:
    kind: str
    namespace: str
    name: str
    source: str
    counted: list[str]  # the legacy resource keys it counts
    stops: str  # what it stops limiting, in words
    dra_form: dict[str, str] = field(default_factory=dict)  # hard entries that count DRA
    # Other objects' maps (a Volcano Queue's): the map's path -> the entries to add there.
    sections: dict[tuple[str, ...], dict[str, str]] = field(default_factory=dict)
    # A Kueue Configuration's missing deviceClassMappings entry.
    kueue_mapping: dict[str, Any] | None = None
    # What objects of its kind share (Kueue's way of counting claims): said once under a table.
    note: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "source": self.source,
            "counts": self.counted,
            "stops": self.stops,
            "draForm": self.dra_form,
            "draSections": {".".join(path): entries for path, entries in self.sections.items()},
            "kueueMapping": self.kueue_mapping,
            "note": self.note,
        }


def _legacy(name: Any, policy: Policy) -> bool:
    return counts_converted(name, policy)


def devices_key(policy: Policy) -> str:
    return f"{policy.webhook.device_class_name}{DEVICES_SUFFIX}"


def quota_report(
    document: Any, policy: Policy, source: str, default_namespace: str
) -> QuotaReport | None:
    """The report for a ResourceQuota or Kueue queue that counts legacy GPU resources."""
    if not isinstance(document, dict):
        return None
    kind, group = str(document.get("kind")), api_group(document)
    metadata = document.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    name = str(metadata.get("name") or "<no name>")
    namespace = str(metadata.get("namespace") or default_namespace)
    if (group, kind) == ("", "ResourceQuota"):
        return _resource_quota(document, policy, source, namespace, name)
    if group == KUEUE_GROUP and kind in ("ClusterQueue", "ResourceFlavor"):
        counted = sorted({n for n in _strings(document) if _legacy(n, policy)})
        if not counted:
            return None
        scope = "" if kind == "ClusterQueue" else namespace
        stops = "converted pods request none of these, so Kueue stops counting their GPUs here"
        return QuotaReport(kind, scope, name, source, counted, stops, note=KUEUE_NOTE)
    if (group, kind) == (KUEUE_CONFIG_GROUP, "Configuration"):
        return _kueue_configuration(document, policy, source, name)
    if (group, kind) == (VOLCANO_GROUP, "Queue"):
        return _volcano_queue(document, policy, source, name)
    return None


KUEUE_FORM = (
    "convert adds one naming the webhook's DeviceClass as the count resource; Kueue then counts"
    " the devices of claims a Job's own pod template references (convert --embedded writes"
    " them), never those of pods converted at admission, and no GPU memory or cores"
)
KUEUE_NOTE = (
    f"Kueue counts DRA claims only through a Configuration's deviceClassMappings: {KUEUE_FORM}"
)


def _kueue_configuration(
    document: JsonObject, policy: Policy, source: str, name: str
) -> QuotaReport | None:
    """A Kueue Configuration: the deviceClassMappings entry that makes a ClusterQueue's count
    resource (nvidia.com/gpu) count the devices of the webhook's class (Kueue's
    apis/config/v1beta2 DeviceClassMapping: name, deviceClassNames)."""
    count = policy.legacy_resource_names.gpus
    device_class = policy.webhook.device_class_name
    resources = document.get("resources")
    mappings = resources.get("deviceClassMappings") if isinstance(resources, dict) else None
    if isinstance(mappings, list) and any(
        isinstance(m, dict) and device_class in (m.get("deviceClassNames") or []) for m in mappings
    ):
        return None  # the class is mapped already
    mapping = {"name": count, "deviceClassNames": [device_class]}
    stops = f"maps no DeviceClass to {count}: Kueue counts no claim of {device_class}; {KUEUE_FORM}"
    report = QuotaReport("Configuration", "", name, source, [count], stops)
    report.kueue_mapping = mapping
    return report


def _volcano_queue(
    document: JsonObject, policy: Policy, source: str, name: str
) -> QuotaReport | None:
    """A Volcano Queue whose capability, deserved or guarantee counts legacy resources, with
    the DRA form of each such map (all three dimensions, or none where one cannot be known)."""
    counted: list[str] = []
    sections: dict[tuple[str, ...], dict[str, str]] = {}
    missing: list[str] = []
    for path in VOLCANO_SECTIONS:
        resources: Any = document
        for part in path:
            resources = resources.get(part) if isinstance(resources, dict) else None
        if not isinstance(resources, dict):
            continue
        legacy = [k for k in resources if _legacy(k, policy)]
        if not legacy:
            continue
        counted += [k for k in legacy if k not in counted]
        form = _volcano_form(resources, policy)
        if isinstance(form, str):
            missing.append(f"{'.'.join(path)}: {form}")
        else:
            sections[path] = {k: v for k, v in form.items() if k not in resources}
    if not counted:
        return None
    words = ["converted pods request none of these, so Volcano stops counting their GPUs here"]
    if sections:
        words.append(
            "claims are counted by deviceclass/, memory.deviceclass/ and cores.deviceclass/"
            f"{policy.webhook.device_class_name} with Volcano v1.15's capacity plugin"
            " (convert adds them)"
        )
    words += missing
    return QuotaReport("Queue", "", name, source, sorted(counted), "; ".join(words), {}, sections)


def _volcano_form(resources: JsonObject, policy: Policy) -> dict[str, str] | str:
    """The three entries Volcano v1.15 counts claims by, from a map's legacy entries; or what
    keeps one of them from being known."""
    names = policy.legacy_resource_names
    device_class = policy.webhook.device_class_name
    try:
        count = _whole(resources.get(names.gpus))
        memory = _whole(resources.get(names.memory))
        cores = _whole(resources.get(names.cores))
    except ValueError as error:
        return str(error)
    if count is None:
        return (
            f"no {names.gpus} to count devices by: add deviceclass/{device_class}"
            " (devices) yourself"
        )
    largest = policy.largest_memory_mib
    if memory is None and not largest:
        return (
            f"no {names.memory} and no card sizes (hamiDraWebhook.deviceMemorySizes): give"
            f" memory.deviceclass/{device_class} yourself"
        )
    mebibytes = memory if memory is not None else count * largest
    return {
        f"deviceclass/{device_class}": str(count),
        f"memory.deviceclass/{device_class}": f"{mebibytes}Mi",
        f"cores.deviceclass/{device_class}": str(cores if cores is not None else count * 100),
    }


def _whole(value: Any) -> int | None:
    if value is None:
        return None
    text = str(value)
    if not text.isdigit():
        raise ValueError(f"{text!r} is not a whole number: give the DRA entries yourself")
    return int(text)


def _resource_quota(
    document: JsonObject, policy: Policy, source: str, namespace: str, name: str
) -> QuotaReport | None:
    spec = document.get("spec")
    hard = spec.get("hard") if isinstance(spec, dict) else None
    if not isinstance(hard, dict):
        return None
    counted = [k for k in hard if _legacy(_bare(k), policy)]
    if not counted:
        return None
    count_name = policy.nvidia.resource_count_name
    kept = quota_keys(policy)
    dra_form = {}
    counts_gpus = [k for k in counted if _bare(k) == count_name]
    if counts_gpus:
        dra_form[devices_key(policy)] = str(hard[counts_gpus[0]])
    not_kept = [k for k in counted if k not in kept]
    words = []
    if len(not_kept) < len(counted):
        words.append(
            "the webhook keeps "
            + ", ".join(k for k in counted if k in kept)
            + " for converted pods: GPU pods here are held by the scheduling gate"
            " hami.io/gpu-quota until they fit (gpuQuota.enabled, docs/quotas.md)"
        )
    if not_kept:
        words.append(
            f"converted pods request none of {', '.join(not_kept)}, so it stops limiting them"
        )
    if dra_form:
        words.append(f"GPUs are also counted by {devices_key(policy)} (convert adds it)")
    if any(_bare(k) != count_name for k in not_kept):
        words.append(NO_CAPACITY_QUOTA)
    return QuotaReport(
        "ResourceQuota", namespace, name, source, counted, "; ".join(words), dra_form
    )


def _bare(key: Any) -> Any:
    return bare_quota_key(key) if isinstance(key, str) else key


def _strings(node: Any, depth: int = 0) -> list[str]:
    """Every string value in a (small) object, to depth 12: a queue's resource names."""
    if depth > 12:
        return []
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v, depth + 1)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v, depth + 1)]
    return []


def dra_quota_ops(document: Any, report: QuotaReport) -> list[patch.PatchOp]:
    """Adds the DRA form's entries a ResourceQuota (or a Volcano Queue's map) lacks; the legacy
    ones stay: pods that are not converted, opted out or in excluded namespaces, still carry
    them."""
    ops = []
    if report.dra_form:
        hard = document["spec"]["hard"]
        ops += [
            patch.add(patch.pointer("spec", "hard", key), value)
            for key, value in report.dra_form.items()
            if key not in hard
        ]
    for path, entries in report.sections.items():
        ops += [patch.add(patch.pointer(*path, key), value) for key, value in entries.items()]
    if report.kueue_mapping is not None:
        resources = document.get("resources")
        if not isinstance(resources, dict):
            ops.append(patch.add("/resources", {"deviceClassMappings": [report.kueue_mapping]}))
        elif not isinstance(resources.get("deviceClassMappings"), list):
            ops.append(patch.add("/resources/deviceClassMappings", [report.kueue_mapping]))
        else:
            ops.append(patch.add("/resources/deviceClassMappings/-", report.kueue_mapping))
    return ops
