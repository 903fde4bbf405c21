"""check: what legacy HAMi left. Its components, the GPU pools, extended resources still offered,
ResourceQuotas on legacy names."""

from __future__ import annotations

from collections.abc import Callable

from hami_dra_webhook.core.migration.node_config import looks_legacy
from hami_dra_webhook.core.migration.pool_plan import Inventory
from hami_dra_webhook.core.migration.pools import LEGACY, POOL_LABEL
from hami_dra_webhook.core.model.resource_quota_view import ResourceQuotaView
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.quota.gpu_quota import counts_converted, quota_keys
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.vendors.families import converted_names
from hami_dra_webhook.preflight.pools import judge_pools, plugin_unrestricted
from hami_dra_webhook.preflight.report import Installation, Report
from hami_dra_webhook.preflight.snapshot import Snapshot, failed


def _legacy_hami(snapshot: Snapshot, policy: Policy, target: Installation, report: Report) -> None:
    """Legacy HAMi may run beside DRA, on nodes of its own pool (docs/migration.md): its
    device plugin DaemonSet must be kept off the DRA pool."""
    check = "legacy HAMi"
    reads = (snapshot.daemonsets, snapshot.deployments, snapshot.webhook_configurations)
    if any(failed(read, check, report) for read in reads):
        return
    daemonsets, deployments, configs = (r if isinstance(r, list) else [] for r in reads)
    plugins = [
        item
        for item in daemonsets
        if looks_legacy(item, ("hami-device-plugin", "vgpu-device-plugin"))
    ]
    found = [f"device plugin DaemonSet {_where(item)}" for item in plugins]
    schedulers = [
        item for item in deployments if looks_legacy(item, ("hami-scheduler", "vgpu-scheduler"))
    ]
    found += [f"scheduler Deployment {_where(item)}" for item in schedulers]
    found += [
        f"webhook {config['metadata']['name']}"
        for config in configs
        if any("vgpu.hami.io" in str(w.get("name")) for w in config.get("webhooks") or [])
    ]
    unrestricted = [_where(item) for item in plugins if plugin_unrestricted(item)]
    classes = snapshot.device_classes if isinstance(snapshot.device_classes, list) else []
    count = policy.legacy_resource_names.gpus
    mapping = [
        str(c["metadata"]["name"])
        for c in classes
        if (c.get("spec") or {}).get("extendedResourceName") == count
    ]
    if schedulers and mapping:
        report.add(
            "FAIL",
            check,
            f"hami-scheduler cannot place legacy pods that ask for {count} with gpumem or"
            f" gpucores while DeviceClass {', '.join(mapping)} maps {count}: kube-scheduler"
            " 1.36+ refuses extended resources no node advertises once one of the pod's is"
            " backed by DRA",
            "turn hamiDraWebhook.wholeGpusByExtendedResource off while legacy HAMi serves"
            " shared pods (on 1.36 hami-scheduler may run with"
            " --feature-gates=DRAExtendedResource=false; 1.37 locks it on)",
        )
    elif unrestricted:
        report.add(
            "FAIL",
            check,
            f"HAMi's device plugin DaemonSet {', '.join(unrestricted)} can run on DRA-pool nodes",
            f"keep it to {POOL_LABEL}={LEGACY} nodes (the nodeSelector entry in docs/migration.md),"
            " or uninstall legacy HAMi",
        )
    elif found:
        report.add(
            "PASS",
            check,
            "running beside DRA, kept to the legacy pool: " + "; ".join(found),
        )
    else:
        report.add("PASS", check, "not running")


def legacy_before_install(snapshot: Snapshot, policy: Policy, report: Report) -> None:
    """Before the chart: legacy HAMi running is no fault, but it decides how to install."""
    check = "legacy HAMi"
    reads = (snapshot.daemonsets, snapshot.deployments)
    if any(failed(read, check, report) for read in reads):
        return
    daemonsets, deployments = (r if isinstance(r, list) else [] for r in reads)
    found = [
        f"device plugin DaemonSet {_where(item)}"
        for item in daemonsets
        if looks_legacy(item, ("hami-device-plugin", "vgpu-device-plugin"))
    ] + [
        f"scheduler Deployment {_where(item)}"
        for item in deployments
        if looks_legacy(item, ("hami-scheduler", "vgpu-scheduler"))
    ]
    if found:
        report.add(
            "WARN",
            check,
            "this cluster runs legacy HAMi (" + "; ".join(found) + "): a plain install would"
            " serve its GPUs twice",
            "move in stages (docs/migration.md): pools first, then the chart with"
            " migration.scope, then nodes in waves",
        )
    else:
        report.add("PASS", check, "not running: install the chart as it is")


def _gpu_pools(snapshot: Snapshot, policy: Policy, target: Installation, report: Report) -> None:
    if failed(snapshot.inventory, "GPU pools", report):
        return
    if isinstance(snapshot.inventory, Inventory):
        judge_pools(snapshot.inventory, report)


def _where(item: JsonObject) -> str:
    metadata = item.get("metadata") or {}
    return f"{metadata.get('namespace')}/{metadata.get('name')}"


def _extended_resources(
    snapshot: Snapshot, policy: Policy, target: Installation, report: Report
) -> None:
    check = "extended resources"
    classes = snapshot.device_classes
    if failed(classes, check, report):
        return
    legacy = set(converted_names(policy))
    web = policy.webhook
    whole = (web.device_class_name, policy.legacy_resource_names.gpus)
    clashes = [
        f"{c['metadata']['name']} ({c['spec']['extendedResourceName']})"
        for c in (classes if isinstance(classes, list) else [])
        if (c.get("spec") or {}).get("extendedResourceName") in legacy
        # wholeGpusByExtendedResource: the webhook's own class gives count-only pods whole GPUs
        and not (
            web.whole_gpus_by_extended_resource
            and (c["metadata"]["name"], c["spec"]["extendedResourceName"]) == whole
        )
    ]
    if clashes:
        report.add(
            "WARN",
            check,
            "DeviceClasses claim legacy names: " + ", ".join(clashes),
            "remove extendedResourceName there: kube-scheduler would give unconverted pods"
            " whole GPUs",
        )
    else:
        report.add("PASS", check, "no DeviceClass claims a legacy resource name")


def _quotas(snapshot: Snapshot, policy: Policy, target: Installation, report: Report) -> None:
    quotas = snapshot.quotas
    if failed(quotas, "quotas", report):
        return
    kept = quota_keys(policy)
    held = _quota_gate(snapshot)
    lost, kept_by, named_kept = [], [], False
    for quota in map(ResourceQuotaView.of, quotas if isinstance(quotas, list) else []):
        counted = sorted(k for k in quota.hard if counts_converted(k, policy))
        gone = [k for k in counted if k not in kept or not held]
        if gone:
            lost.append(f"{quota.where} ({', '.join(gone)})")
        if len(gone) < len(counted):
            kept_by.append(quota.where)
        named_kept = named_kept or any(k in kept for k in counted)
    lines = snapshot.gpu_quotas if isinstance(snapshot.gpu_quotas, list) else []
    for line in lines if held else []:
        report.add(
            "PASS",
            "quotas",
            f"{line.namespace}/{line.quota} keeps limiting converted pods: {line.key}"
            f" {line.used_words} used of {line.hard}, {line.held} pods held by"
            " hami.io/gpu-quota",
        )
    if kept_by and held and not lines:
        report.add("PASS", "quotas", "GPU quotas kept: " + ", ".join(kept_by))
    if lost:
        hint = (
            "count DRA instead: quota on resourceclaims, or"
            " <deviceclass>.deviceclass.resource.k8s.io/devices"
        )
        if not held and named_kept:
            hint = "install the chart with gpuQuota.enabled (docs/quotas.md); or " + hint
        report.add(
            "WARN",
            "quotas",
            "ResourceQuotas count legacy resources, which converted pods no longer carry: "
            + "; ".join(lost),
            hint,
        )
    elif not kept_by:
        report.add("PASS", "quotas", "no ResourceQuota counts legacy resources")


def _quota_gate(snapshot: Snapshot) -> bool:
    """Whether the installed webhook holds GPU pods by their namespace's quota."""
    config = snapshot.webhook_configuration
    webhooks = config.get("webhooks") or [] if isinstance(config, dict) else []
    return any(str(w.get("name", "")).startswith("gpu-quota.") for w in webhooks)


Check = Callable[[Snapshot, Policy, Installation, Report], None]
# Those that mean the same before the chart is installed (check --before-install).
CHECKS_OF_THE_CLUSTER: tuple[Check, ...] = (_extended_resources, _quotas)
CHECKS: tuple[Check, ...] = (_legacy_hami, _gpu_pools, *CHECKS_OF_THE_CLUSTER)
