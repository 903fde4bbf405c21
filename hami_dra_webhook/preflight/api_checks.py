"""check: the API side. kube-apiserver's version and DRA API, consumable capacity kept, the
DeviceClass and the driver's ResourceSlices."""

from __future__ import annotations

from collections.abc import Callable

from hami_dra_webhook.cluster.state import capacity_kept
from hami_dra_webhook.core.model.quantity import QuantityError, format_bytes, parse_byte_size
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.preflight.report import Installation, NodeGpus, Report, counted
from hami_dra_webhook.preflight.snapshot import Snapshot, failed


def _version(snapshot: Snapshot, policy: Policy, target: Installation, report: Report) -> None:
    answer = snapshot.version
    if failed(answer, "Kubernetes", report) or not isinstance(answer, dict):
        return
    text = str(answer.get("gitVersion") or f"v{answer.get('major')}.{answer.get('minor')}")
    try:
        minor = int(str(answer.get("minor", "")).rstrip("+"))
    except ValueError:
        report.add("WARN", "Kubernetes", f"{text}: cannot tell the minor version", "")
        return
    if minor == 34:
        report.add(
            "WARN",
            "Kubernetes",
            f"{text}: kube-scheduler 1.34 does not place shared GPUs reliably (its alpha"
            " consumable-capacity allocator stops at the first full GPU and never places"
            " gpumem-percentage claims)",
            "share GPUs on Kubernetes 1.35 or later; whole GPUs work on 1.34",
        )
    else:
        report.add("PASS", "Kubernetes", text)


def _api_served(snapshot: Snapshot, policy: Policy, target: Installation, report: Report) -> None:
    check = "resource.k8s.io/v1"
    discovery = snapshot.dra_group
    if failed(discovery, check, report):
        return
    if not isinstance(discovery, dict):  # Missing
        report.add("FAIL", check, "not served", "use Kubernetes 1.34 or later")
        return
    names = {r.get("name") for r in discovery.get("resources") or []}
    if "resourceclaimtemplates" in names:
        report.add("PASS", check, "served, with ResourceClaimTemplates")
    else:
        report.add(
            "FAIL",
            check,
            "served without resourceclaimtemplates",
            "enable DynamicResourceAllocation",
        )


def _capacity(snapshot: Snapshot, policy: Policy, target: Installation, report: Report) -> None:
    answer = snapshot.capacity_probe
    if failed(answer, "consumable capacity", report):
        return
    if not isinstance(answer, dict):  # no namespace to dry-run a claim in
        report.add(
            "WARN",
            "consumable capacity",
            f"not probed: neither namespace {target.namespace} nor default exists",
            "pass the chart's namespace with -n, or create it, and check again",
        )
        return
    if capacity_kept(answer):
        report.add("PASS", "consumable capacity", "a dry-run claim keeps its capacity request")
    else:
        report.add(
            "FAIL",
            "consumable capacity",
            "kube-apiserver drops capacity requests: shared GPUs would become whole GPUs",
            "enable the DRAConsumableCapacity feature gate on kube-apiserver, kube-scheduler,"
            " kube-controller-manager and kubelets (default on from 1.36)",
        )


def _device_class(snapshot: Snapshot, policy: Policy, target: Installation, report: Report) -> None:
    web = policy.webhook
    device_class = snapshot.device_class
    if failed(device_class, "DeviceClass", report):
        return
    if not isinstance(device_class, dict):  # Missing
        report.add(
            "FAIL",
            "DeviceClass",
            f"{web.device_class_name} does not exist",
            "install the chart with deviceClass.create=true",
        )
        return
    selectors = [
        (s.get("cel") or {}).get("expression", "")
        for s in (device_class.get("spec") or {}).get("selectors") or []
    ]
    if any(web.driver_name in expression for expression in selectors):
        report.add(
            "PASS", "DeviceClass", f"{web.device_class_name} selects {web.driver_name} devices"
        )
    else:
        report.add(
            "FAIL",
            "DeviceClass",
            f"{web.device_class_name} does not select {web.driver_name}",
            "fix its CEL selector (see examples/deviceclass.yaml)",
        )


def _slices(snapshot: Snapshot, policy: Policy, target: Installation, report: Report) -> None:
    web = policy.webhook
    slices = snapshot.driver_slices
    if failed(slices, "driver", report):
        return
    by_node: dict[str, NodeGpus] = {}
    missing: set[str] = set()
    for resource_slice in slices if isinstance(slices, list) else []:
        spec = resource_slice.get("spec") or {}
        if spec.get("driver") != web.driver_name:
            continue
        node = str(spec.get("nodeName") or "<no node>")
        entry = by_node.setdefault(node, NodeGpus(node, 0, [], True))
        for device in spec.get("devices") or []:
            capacity = device.get("capacity") or {}
            entry.gpus += 1
            memory = (capacity.get(web.capacity_keys.memory) or {}).get("value")
            entry.memory.append(_readable(memory))
            if memory is None or web.capacity_keys.cores not in capacity:
                missing.add(node)
            if not device.get("allowMultipleAllocations"):
                entry.shareable = False
    report.nodes = sorted(by_node.values(), key=lambda n: n.node)
    if not by_node:
        report.add(
            "FAIL",
            "driver",
            f"no ResourceSlices of {web.driver_name}",
            "check the driver DaemonSet (driver.enabled, driver.nodeSelector) on the GPU nodes",
        )
        return
    total = sum(n.gpus for n in by_node.values())
    unshareable = [n.node for n in by_node.values() if not n.shareable]
    if missing:
        report.add(
            "FAIL",
            "driver",
            f"devices without memory/cores capacity on {', '.join(sorted(missing))}",
            "use the HAMi DRA driver v0.1.0 or later",
        )
    elif unshareable:
        report.add(
            "FAIL",
            "driver",
            f"devices not multi-allocatable on {', '.join(unshareable)}",
            "enable DRAConsumableCapacity (kube-apiserver drops allowMultipleAllocations"
            " without it)",
        )
    else:
        shareable = counted(total, "shareable GPU")
        report.add("PASS", "driver", f"{shareable} on {counted(len(by_node), 'node')}")


def _readable(memory: object) -> str:
    try:
        return format_bytes(parse_byte_size(str(memory)))
    except QuantityError:
        return str(memory)


Check = Callable[[Snapshot, Policy, Installation, Report], None]
# What the cluster itself must offer, with or without the chart.
CHECKS_OF_THE_CLUSTER: tuple[Check, ...] = (_version, _api_served, _capacity)
CHECKS: tuple[Check, ...] = (*CHECKS_OF_THE_CLUSTER, _device_class, _slices)
