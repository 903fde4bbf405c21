"""The legacy device plugin's per-node config, read where its DaemonSet reads it (the ConfigMap
mounted at /config), for `check` and `scan --cluster` (core/migration/node_config.py judges)."""

from __future__ import annotations

from hami_dra_webhook.core.migration.device_cordons import rules_served
from hami_dra_webhook.core.migration.node_config import (
    CONFIG_KEY,
    DEVICE_PLUGIN_NAMES,
    config_map_of,
    looks_legacy,
)
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.kube.port import ApiError, KubeApi, paths


async def device_plugin_configs(
    api: KubeApi, daemonsets: list[JsonObject], timeout: float
) -> list[tuple[str, str]]:
    """(where, config.json) of every legacy device plugin DaemonSet's config; a ConfigMap that
    is gone is skipped (the DaemonSet's pods would not start either)."""
    found: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for daemonset in daemonsets:
        if not looks_legacy(daemonset, DEVICE_PLUGIN_NAMES):
            continue
        name = config_map_of(daemonset)
        namespace = str((daemonset.get("metadata") or {}).get("namespace") or "")
        if not name or not namespace or (namespace, name) in seen:
            continue
        seen.add((namespace, name))
        try:
            config = await api.get_path(paths.config_map(namespace, name), timeout=timeout)
        except ApiError as error:
            if error.status == 404:
                continue
            raise
        text = (config.get("data") or {}).get(CONFIG_KEY)
        if isinstance(text, str):
            found.append((f"ConfigMap {namespace}/{name}", text))
    return found


async def device_taint_rules_served(api: KubeApi, timeout: float) -> bool:
    """Whether the cluster serves DeviceTaintRules as resource.k8s.io/v1 (Kubernetes 1.37+)."""
    return rules_served(await api.get_path(paths.DRA_GROUP, timeout=timeout))
