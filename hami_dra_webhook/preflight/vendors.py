"""`check`, per device family beyond NVIDIA that is converted by the policy or present in the
cluster (nodes offering its legacy resources, Hygon's `hcu=on` node label): is its DRA driver
there, on those nodes, and does its DeviceClass exist? Pure: it judges a snapshot."""

from __future__ import annotations

from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.vendors.profile import Family
from hami_dra_webhook.preflight.family_nodes import families_to_check
from hami_dra_webhook.preflight.report import Report, counted
from hami_dra_webhook.preflight.snapshot import Failed, Snapshot


def vendors(snapshot: Snapshot, policy: Policy, report: Report) -> None:
    if isinstance(snapshot.nodes, Failed):
        report.add("FAIL", "vendors", f"the API failed: {snapshot.nodes.error}", "")
        return
    nodes = snapshot.nodes if isinstance(snapshot.nodes, list) else []
    for family, present in families_to_check(nodes, policy):
        _family(snapshot, family, present, report)


def _family(snapshot: Snapshot, family: Family, nodes: list[str], report: Report) -> None:
    check = family.title
    shown = ", ".join(nodes[:5]) + (", ..." if len(nodes) > 5 else "")
    where = f" (nodes: {shown})" if nodes else ""
    if family.driver is None:
        report.add(
            "WARN",
            check,
            f"present{where}; no DRA driver exists for it, so its pods stay on legacy HAMi",
            "keep legacy HAMi for these nodes; the webhook refuses or leaves such pods"
            " (hamiDraWebhook.otherVendors)",
        )
        return
    slices = snapshot.vendor_slices.get(family.driver, [])
    if isinstance(slices, Failed):
        report.add("FAIL", check, f"the API failed: {slices.error}", "")
        return
    specs = [s.get("spec") or {} for s in (slices if isinstance(slices, list) else [])]
    own = [spec for spec in specs if spec.get("driver") == family.driver]
    devices = sum(len(spec.get("devices") or []) for spec in own)
    driver_nodes = {str(spec.get("nodeName")) for spec in own}
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
    missing = [n for n in nodes if n not in driver_nodes]
    if missing:
        report.add(
            "WARN",
            check,
            f"{family.driver} publishes {devices} devices, but not on {', '.join(missing[:5])}",
            f"install the {family.driver} driver on every node with these devices",
        )
        return
    if _device_class_missing(snapshot, family, report):
        return
    report.add(
        "PASS",
        check,
        f"{family.driver} publishes {counted(devices, 'device')}"
        f" on {counted(len(driver_nodes), 'node')}",
    )


def _device_class_missing(snapshot: Snapshot, family: Family, report: Report) -> bool:
    """A FAIL line when the family's DeviceClass cannot be read or does not exist."""
    check = family.title
    device_class = snapshot.vendor_classes.get(str(family.device_class))
    if not isinstance(device_class, dict):
        problem = (
            f"the API failed: {device_class.error}"
            if isinstance(device_class, Failed)
            else f"DeviceClass {family.device_class} does not exist"
        )
        report.add(
            "FAIL",
            check,
            problem,
            "install the chart with deviceClass.vendors for this family, or the driver's own",
        )
        return True
    return False
