"""`check`, per device family beyond NVIDIA present in the cluster (nodes offering its legacy
resources, Hygon's `hcu=on` node label, or its driver's ResourceSlices) or converted by the
policy: is its DRA driver there, does its DeviceClass exist, and are its pods converted?"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hami_dra_webhook.core.policy import Policy
from hami_dra_webhook.core.types import JsonObject
from hami_dra_webhook.core.vendors.families import NVIDIA, Family
from hami_dra_webhook.kube.port import ApiError, KubeApi, paths

if TYPE_CHECKING:
    from hami_dra_webhook.migrate.check import Report, Target

# Node labels that say a family's cards are there, besides the legacy resources a node offers.
FAMILY_NODE_LABELS = {"hygon": ("hcu", "on")}


def family_nodes(nodes: list[JsonObject], policy: Policy) -> dict[str, list[str]]:
    """Family key -> the nodes that show its devices (legacy resources offered, or a label)."""
    found: dict[str, set[str]] = {}
    for node in nodes:
        name = str((node.get("metadata") or {}).get("name"))
        labels = (node.get("metadata") or {}).get("labels") or {}
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        for resource, amount in allocatable.items():
            family = policy.families.of(resource)
            if family is not None and family.key != NVIDIA and str(amount) not in ("0", ""):
                found.setdefault(family.key, set()).add(name)
        for key, (label, value) in FAMILY_NODE_LABELS.items():
            if labels.get(label) == value:
                found.setdefault(key, set()).add(name)
    return {key: sorted(names) for key, names in found.items()}


async def vendors(
    api: KubeApi, policy: Policy, target: Target, report: Report, timeout: float
) -> None:
    nodes = family_nodes(await api.list_path(paths.NODES, [], timeout=timeout), policy)
    for family in policy.families.all:
        if family.key == NVIDIA or not (family.converted or family.key in nodes):
            continue
        await _family(api, family, nodes.get(family.key, []), report, timeout)


async def _family(
    api: KubeApi, family: Family, nodes: list[str], report: Report, timeout: float
) -> None:
    check = family.title
    where = f" (nodes: {', '.join(nodes[:5])}{', ...' if len(nodes) > 5 else ''})" if nodes else ""
    if family.driver is None:
        report.add(
            "WARN",
            check,
            f"present{where}; no DRA driver exists for it, so its pods stay on legacy HAMi",
            "keep legacy HAMi for these nodes; the webhook refuses or leaves such pods"
            " (hamiDraWebhook.otherVendors)",
        )
        return
    slices = await api.list_resource_slices(family.driver, timeout=timeout)
    devices = sum(
        len((s.get("spec") or {}).get("devices") or [])
        for s in slices
        if (s.get("spec") or {}).get("driver") == family.driver
    )
    drivers_nodes = {
        str((s.get("spec") or {}).get("nodeName"))
        for s in slices
        if (s.get("spec") or {}).get("driver") == family.driver
    }
    if not family.converted:
        report.add(
            "WARN",
            check,
            f"present{where}, {devices} devices published by {family.driver}; not converted by"
            " this policy, so its pods stay on legacy HAMi",
            f"set {family.enable} to convert them",
        )
        return
    if not devices:
        report.add(
            "FAIL",
            check,
            f"converted by this policy, but no ResourceSlices of {family.driver}{where}: its"
            " converted pods would stay Pending",
            f"install the {family.driver} DRA driver on those nodes",
        )
        return
    missing = [n for n in nodes if n not in drivers_nodes]
    if missing:
        report.add(
            "WARN",
            check,
            f"{family.driver} publishes {devices} devices, but not on {', '.join(missing[:5])}",
            f"install the {family.driver} driver on every node with these devices",
        )
    elif not await _class_exists(api, family, report, timeout):
        return
    else:
        report.add(
            "PASS",
            check,
            f"{family.driver} publishes {devices} devices on {len(drivers_nodes)} nodes",
        )


async def _class_exists(api: KubeApi, family: Family, report: Report, timeout: float) -> bool:
    assert family.device_class is not None
    try:
        await api.get_path(paths.device_class(family.device_class), timeout=timeout)
    except ApiError as error:
        if error.status != 404:
            raise
        report.add(
            "FAIL",
            family.title,
            f"DeviceClass {family.device_class} does not exist",
            "install the chart with deviceClass.vendors for this family, or the driver's own",
        )
        return False
    return True
