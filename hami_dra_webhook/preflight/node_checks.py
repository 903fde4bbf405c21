"""check: the driver and the node side. Which nodes run the DRA driver, their devices, the driver's
pods and images, Pod Security and container runtimes."""

from __future__ import annotations

import re
from collections.abc import Callable

from hami_dra_webhook.core.migration.pools import DRA, GPU_NODE_LABELS, LEGACY, MOVING, POOL_LABEL
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.preflight.report import Installation, Report
from hami_dra_webhook.preflight.snapshot import Snapshot, failed

DEVICE_NAME = re.compile(r"^hami-gpu-\d+$")


PRIVILEGED_LEVELS = ("", "privileged")


# HAMi DRA driver v0.1.0 (the chart's default): after a node reboot the kubelet replays
# NodePrepareResources for the claims of the node's pods, and v0.1.0 answers "claims in
# PrepareCompleted state are not supported" (Project-HAMi/k8s-dra-driver issue #45, open).
DRIVER_V0_1_0 = re.compile(r":v?0\.1\.0(@|$)")


REBOOT_HELP = (
    "after a node reboot, delete the converted pods on that node (their controllers re-create"
    " them with new claims); use a driver release that fixes k8s-dra-driver#45 once there is one"
)


def _node_side(snapshot: Snapshot, policy: Policy, target: Installation, report: Report) -> None:
    """What the nodes must provide: a running driver pod on every GPU node, hami-gpu-N devices
    published, CDI in the container runtime, and a namespace that admits a privileged pod."""
    nodes, pods = snapshot.nodes, snapshot.driver_pods
    if failed(nodes, "GPU nodes", report) or failed(pods, "driver pods", report):
        return
    gpu_nodes = {
        str(node["metadata"]["name"]): node
        for node in (nodes if isinstance(nodes, list) else [])
        if any(
            (node["metadata"].get("labels") or {}).get(label) == "true" for label in GPU_NODE_LABELS
        )
        and _dra_side(node, snapshot)
    }
    if not gpu_nodes:
        report.add(
            "WARN",
            "GPU nodes",
            f"no node is labelled {' or '.join(f'{x}=true' for x in GPU_NODE_LABELS)}",
            "run GPU feature discovery or Node Feature Discovery, or set driver.nodeAffinity",
        )
        return
    pod_list = pods if isinstance(pods, list) else []
    driver_pods = {
        str((pod.get("spec") or {}).get("nodeName")): pod
        for pod in pod_list
        if (pod.get("spec") or {}).get("nodeName")
    }
    _driver_pods(gpu_nodes, driver_pods, report)
    _monitor_pods(gpu_nodes, snapshot.monitor_pods, report)
    _driver_images(driver_pods, report)
    _devices(snapshot, policy, gpu_nodes, driver_pods, report)
    _container_runtimes(gpu_nodes, report)
    _pod_security(snapshot, report)


def gpu_nodes_before_install(snapshot: Snapshot, report: Report) -> None:
    """Before the chart: labelled GPU nodes for its driver, and runtimes that read CDI."""
    nodes = snapshot.nodes
    if failed(nodes, "GPU nodes", report):
        return
    gpu_nodes = {
        str(node["metadata"]["name"]): node
        for node in (nodes if isinstance(nodes, list) else [])
        if any(
            (node["metadata"].get("labels") or {}).get(label) == "true" for label in GPU_NODE_LABELS
        )
    }
    if not gpu_nodes:
        report.add(
            "WARN",
            "GPU nodes",
            f"no node is labelled {' or '.join(f'{x}=true' for x in GPU_NODE_LABELS)}",
            "run GPU feature discovery or Node Feature Discovery, or set driver.nodeAffinity",
        )
        return
    report.add("PASS", "GPU nodes", f"{len(gpu_nodes)} labelled for the driver")
    _container_runtimes(gpu_nodes, report)


def _dra_side(node: JsonObject, snapshot: Snapshot) -> bool:
    """Whether the driver should run on the node: not in the legacy pool (nor moving), and,
    when the migration scope is not `all`, in the DRA pool."""
    pool = (node["metadata"].get("labels") or {}).get(POOL_LABEL, "")
    if snapshot.scope.mode != "all":
        return bool(pool == DRA)
    return pool not in (LEGACY, MOVING)


def _devices(
    snapshot: Snapshot,
    policy: Policy,
    gpu_nodes: dict[str, JsonObject],
    driver_pods: dict[str, JsonObject],
    report: Report,
) -> None:
    slices = snapshot.driver_slices
    devices: dict[str, list[str]] = {}
    for resource_slice in slices if isinstance(slices, list) else []:
        spec = resource_slice.get("spec") or {}
        names = [str(d.get("name")) for d in spec.get("devices") or []]
        devices.setdefault(str(spec.get("nodeName")), []).extend(names)
    silent = [
        node
        for node in sorted(gpu_nodes)
        if node in driver_pods and not any(DEVICE_NAME.match(n) for n in devices.get(node, []))
    ]
    if silent:
        report.add(
            "FAIL",
            "devices",
            f"no hami-gpu-N devices published by {policy.webhook.driver_name} on"
            f" {', '.join(silent)}",
            "read the driver pod's log on those nodes (NVIDIA driver, CDI, HAMi-core setup)",
        )
    else:
        with_pods = sum(1 for node in gpu_nodes if node in driver_pods)
        report.add(
            "PASS", "devices", f"hami-gpu-N devices on {with_pods} node(s) with a driver pod"
        )


def _pod_security(snapshot: Snapshot, report: Report) -> None:
    namespaces = snapshot.namespaces
    if failed(namespaces, "pod security", report) or not isinstance(namespaces, dict):
        return
    strict = []
    for name, namespace in sorted(namespaces.items()):
        labels = (namespace.get("metadata") or {}).get("labels") or {}
        level = str(labels.get("pod-security.kubernetes.io/enforce", ""))
        if level not in PRIVILEGED_LEVELS:
            strict.append(f"{name} ({level})")
    if strict:
        report.add(
            "FAIL",
            "pod security",
            f"the driver is privileged, but {', '.join(strict)} enforces less",
            "put the driver in a namespace of its own (driver.namespace, driver.createNamespace)",
        )
    else:
        names = ", ".join(sorted(namespaces))
        report.add("PASS", "pod security", f"{names} admits the privileged driver")


def _driver_images(driver_pods: dict[str, JsonObject], report: Report) -> None:
    images = sorted(
        {
            str(container.get("image", ""))
            for pod in driver_pods.values()
            for container in (pod.get("spec") or {}).get("containers") or []
        }
    )
    if not images:
        return
    old = [image for image in images if DRIVER_V0_1_0.search(image)]
    if old:
        report.add(
            "WARN",
            "driver version",
            f"{', '.join(old)}: v0.1.0 cannot prepare a running pod's claims again after a node"
            " reboot (k8s-dra-driver#45), so those pods do not start again",
            REBOOT_HELP,
        )
    else:
        report.add("PASS", "driver version", ", ".join(images))
    loose = [image for image in images if "@sha256:" not in image]
    if loose:
        report.add(
            "FAIL",
            "driver image",
            f"not pinned by a digest: {', '.join(loose)}",
            "pin it: helm upgrade ... --set driver.image.digest=sha256:... (read the digest with"
            " `crane digest IMAGE` or `docker buildx imagetools inspect IMAGE`): a tag can be"
            " pushed again with other content, and nodes that pull it later would run another"
            " driver than the one moved nodes were checked with",
        )
    else:
        report.add("PASS", "driver image", "pinned by digest")


def _driver_pods(
    gpu_nodes: dict[str, JsonObject], driver_pods: dict[str, JsonObject], report: Report
) -> None:
    missing = [node for node in sorted(gpu_nodes) if node not in driver_pods]
    stopped = [
        f"{node} ({(driver_pods[node].get('status') or {}).get('phase', 'no status')})"
        for node in sorted(gpu_nodes)
        if node in driver_pods and (driver_pods[node].get("status") or {}).get("phase") != "Running"
    ]
    if missing:
        report.add(
            "FAIL",
            "driver pods",
            f"GPU nodes without a driver pod: {', '.join(missing)}; converted pods stay Pending"
            " there",
            "check the driver DaemonSet's nodeAffinity, nodeSelector and tolerations",
        )
    elif stopped:
        report.add("WARN", "driver pods", f"not running: {', '.join(stopped)}", "read their events")
    else:
        report.add("PASS", "driver pods", f"running on all {len(gpu_nodes)} GPU node(s)")


def _monitor_pods(gpu_nodes: dict[str, JsonObject], pods: object, report: Report) -> None:
    """The node monitor on every node the driver serves: without it, that node's converted pods
    have no per-container GPU metrics and no HAMi feedback loop (docs/node-monitor.md)."""
    if pods is None:
        report.add(
            "WARN",
            "node monitor",
            "not installed (monitor.enabled=false): converted pods have no per-container GPU"
            " metrics (hami_vgpu_memory_used_bytes, ...) and HAMi's feedback loop does not run",
            "set monitor.enabled=true, unless another exporter covers DRA claims",
        )
        return
    if failed(pods, "node monitor", report):
        return
    running = {
        str((pod.get("spec") or {}).get("nodeName"))
        for pod in (pods if isinstance(pods, list) else [])
        if (pod.get("status") or {}).get("phase") == "Running"
    }
    missing = [node for node in sorted(gpu_nodes) if node not in running]
    if missing:
        report.add(
            "WARN",
            "node monitor",
            f"DRA nodes without a running node monitor: {', '.join(missing)}; their converted"
            " pods have no per-container GPU metrics and no feedback loop",
            "read the monitor DaemonSet's events: it needs a privileged namespace (hostPID, a"
            " hostPath) and the driver's tolerations",
        )
    else:
        report.add("PASS", "node monitor", f"running on all {len(gpu_nodes)} DRA GPU node(s)")


def _container_runtimes(gpu_nodes: dict[str, JsonObject], report: Report) -> None:
    """The driver hands devices over as CDI specs: containerd 2 or CRI-O 1.23 read them by
    default, containerd 1.7 only with enable_cdi = true."""
    problems, notes = [], []
    for node, found in sorted(gpu_nodes.items()):
        runtime = str(
            ((found.get("status") or {}).get("nodeInfo") or {}).get("containerRuntimeVersion", "")
        )
        name, _, version = runtime.partition("://")
        parts = [int(p) for p in re.findall(r"\d+", version)[:2]] + [0, 0]
        major_minor = (parts[0], parts[1])
        if name == "containerd" and major_minor >= (2, 0):
            continue
        if name == "cri-o" and major_minor >= (1, 23):
            continue
        if name == "containerd" and major_minor >= (1, 7):
            notes.append(f"{node} ({runtime})")
        else:
            problems.append(f"{node} ({runtime or 'unknown runtime'})")
    if problems:
        report.add(
            "FAIL",
            "container runtime",
            f"no CDI support known on {', '.join(problems)}",
            "use containerd 2.0+ or CRI-O 1.23+ (containerd 1.7 with enable_cdi = true)",
        )
    elif notes:
        report.add(
            "WARN",
            "container runtime",
            f"CDI is off by default on {', '.join(notes)}",
            "set enable_cdi = true in the CRI plugin section of containerd's config",
        )
    else:
        report.add("PASS", "container runtime", "CDI-capable on every GPU node")


CHECKS: tuple[Callable[[Snapshot, Policy, Installation, Report], None], ...] = (_node_side,)
