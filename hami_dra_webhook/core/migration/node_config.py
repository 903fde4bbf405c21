"""What each node loses under DRA of what legacy HAMi's device plugin did there: its per-node
config (the `hami-device-plugin` ConfigMap's `config.json`, `nodeconfig` entries, HAMi v2.10
pkg/device/nvidia/device.go DevicePluginConfigs: Go's encoding/json matches keys regardless of
case) and its cards' cordon (`hami.io/device-cordon`). Pure: `check` and `scan --cluster` read
the objects (cluster/moves/legacy_node_config.py) and say these words."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hami_dra_webhook.core.migration.device_cordons import CordonError, cordoned_uuids
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.settings.policy import Policy

DEVICE_PLUGIN_NAMES = ("hami-device-plugin", "vgpu-device-plugin")
CONFIG_MOUNT = "/config"  # where HAMi's device plugin reads config.json (server.go ConfigFilePath)
CONFIG_KEY = "config.json"
MAX_CONFIG = 1 << 20  # a ConfigMap holds at most 1 MiB
MAX_LISTED = 8  # UUIDs or indexes named per node


@dataclass(frozen=True)
class NodeLosses:
    node: str
    losses: tuple[str, ...]

    @property
    def words(self) -> str:
        return f"{self.node}: " + "; ".join(self.losses)


def looks_legacy(item: JsonObject, names: tuple[str, ...]) -> bool:
    """A legacy HAMi component by its name or image (its chart's names, or HAMi's images)."""
    name = str((item.get("metadata") or {}).get("name", ""))
    containers = (((item.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
        "containers"
    ) or []
    images = " ".join(str(c.get("image", "")) for c in containers)
    return (
        any(n in name for n in names)
        or "projecthami/hami:" in images
        or "4pdosc/k8s-vgpu" in images
    )


def config_map_of(daemonset: JsonObject) -> str:
    """The ConfigMap a legacy device plugin DaemonSet reads its per-node config from (the
    volume mounted at /config; the chart's `devicePlugin.nodeConfiguration`), or ""."""
    spec = ((daemonset.get("spec") or {}).get("template") or {}).get("spec") or {}
    mounted = {
        m.get("name")
        for c in spec.get("containers") or []
        for m in (c.get("volumeMounts") or [])
        if isinstance(m, dict) and m.get("mountPath") == CONFIG_MOUNT
    }
    for volume in spec.get("volumes") or []:
        config = volume.get("configMap") if isinstance(volume, dict) else None
        if volume.get("name") in mounted and isinstance(config, dict) and config.get("name"):
            return str(config["name"])
    return ""


class NodeConfigError(ValueError):
    """The device plugin's config.json cannot be read; the message says what is wrong."""


def node_config_entries(text: str, source: str) -> list[JsonObject]:
    """The `nodeconfig` entries of a device plugin config.json, keys lower-cased (as Go's
    encoding/json matches them)."""
    if len(text) > MAX_CONFIG:
        raise NodeConfigError(f"{source}: config.json is larger than a ConfigMap holds")
    try:
        document = json.loads(text) if text.strip() else {}
    except ValueError as error:
        raise NodeConfigError(f"{source}: config.json is not JSON: {error}") from error
    entries = _lower(document).get("nodeconfig") if isinstance(document, dict) else None
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise NodeConfigError(f"{source}: config.json's nodeconfig is not a list")
    return [e for e in (_lower(entry) for entry in entries) if isinstance(e, dict)]


def _lower(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k).lower(): v for k, v in value.items()}
    return value


def entry_losses(entry: JsonObject, policy: Policy) -> tuple[str, ...]:
    """What one node's settings do that DRA does not, in words (empty: nothing)."""
    losses: list[str] = []
    mode = str(entry.get("operatingmode") or "")
    if mode in ("mig", "mps"):
        losses.append(
            f"operating mode {mode}: the DRA driver v0.1.0 offers only HAMi-core shares, so its"
            f" cards' {'MIG instances' if mode == 'mig' else 'MPS sharing'} are gone"
        )
    scaling = _number(entry.get("devicememoryscaling"))
    cluster = policy.nvidia.device_memory_scaling
    if scaling is not None and scaling != cluster:
        losses.append(
            f"deviceMemoryScaling {scaling:g} (the cluster's is {cluster:g}): the webhook counts"
            f" gpumem-percentage with {cluster:g} on every node"
            + ("; DRA does not oversubscribe memory" if scaling > 1 else "")
        )
    cores = _number(entry.get("devicecorescaling"))
    if cores is not None and cores != 1:
        losses.append(f"deviceCoreScaling {cores:g}: DRA's cores capacity is 100 per card")
    split = _number(entry.get("devicesplitcount"))
    if split is not None:
        losses.append(f"deviceSplitCount {split:g}: DRA has no cap on tasks per card")
    hidden = _filtered(entry.get("filterdevices"))
    if hidden:
        losses.append(
            f"cards hidden from HAMi ({hidden}) are published by the DRA driver and get work:"
            " list their UUIDs in hami.io/device-cordon, which migrate node carries as"
            " DeviceTaintRules"
        )
    if entry.get("enablenumatopology") is True:
        losses.append("enableNumaTopology: no NUMA alignment under DRA")
    level = entry.get("libcudaloglevel")
    cluster_level = policy.nvidia.lib_cuda_log_level
    if level not in (None, "") and str(level) != str(cluster_level):
        kept = "none" if cluster_level is None else str(cluster_level)
        losses.append(
            f"libCudaLogLevel {level}: the webhook sets the cluster's ({kept}) everywhere"
        )
    memory = _number(entry.get("preconfigureddevicememory"))
    if memory:
        losses.append(
            f"preConfiguredDeviceMemory {memory:g} MiB: the DRA driver publishes what NVML"
            " reports (GPUs without it, such as GB10, are not published)"
        )
    return tuple(losses)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _filtered(value: Any) -> str:
    if not isinstance(value, dict):
        return ""
    value = _lower(value)
    said = []
    for key in ("uuid", "index"):
        items = value.get(key)
        if isinstance(items, list) and items:
            shown = ", ".join(str(i) for i in items[:MAX_LISTED])
            more = f" and {len(items) - MAX_LISTED} more" if len(items) > MAX_LISTED else ""
            said.append(f"{key} {shown}{more}")
    return "; ".join(said)


def cordon_losses(node: JsonObject, served: bool) -> tuple[str, ...]:
    """A node's `hami.io/device-cordon` (nothing where it lists none)."""
    try:
        uuids = cordoned_uuids(node)
    except CordonError as error:
        return (str(error),)
    if not uuids:
        return ()
    carried = (
        "migrate node --to dra carries them as DeviceTaintRules"
        if served
        else "this cluster serves no DeviceTaintRule (Kubernetes 1.37+), so migrate node --to"
        " dra refuses to move it until it does or the annotation goes"
    )
    return (f"{len(uuids)} card(s) cordoned (hami.io/device-cordon): {carried}",)


def node_losses(
    configs: list[tuple[str, str]], nodes: list[JsonObject], policy: Policy, rules_served: bool
) -> tuple[list[NodeLosses], list[str]]:
    """Each node that loses something under DRA and what; and the configs that could not be
    read (`configs`: (where it came from, config.json))."""
    losses: dict[str, list[str]] = {}
    errors: list[str] = []
    for source, text in configs:
        try:
            entries = node_config_entries(text, source)
        except NodeConfigError as error:
            errors.append(str(error))
            continue
        for entry in entries:
            name = str(entry.get("name") or "")
            found = entry_losses(entry, policy)
            if name and found:
                losses.setdefault(name, []).extend(x for x in found if x not in losses[name])
    for node in nodes:
        name = str((node.get("metadata") or {}).get("name") or "")
        found = cordon_losses(node, rules_served)
        if name and found:
            losses.setdefault(name, []).extend(found)
    return [NodeLosses(n, tuple(v)) for n, v in sorted(losses.items())], errors
