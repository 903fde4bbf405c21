"""The checks of `check`: each judges the snapshot (no I/O) and adds its lines to the report.
Every line is named after what it checks, never after a function; a read the API failed is a
FAIL line of the check that needed it."""

from __future__ import annotations

import base64
import datetime
import re
from collections.abc import Callable
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature

from hami_dra_webhook.cluster.state import capacity_kept
from hami_dra_webhook.core.policy import Policy
from hami_dra_webhook.core.pool_plan import Inventory
from hami_dra_webhook.core.pools import DRA, GPU_NODE_LABELS, LEGACY, MOVING, POOL_LABEL
from hami_dra_webhook.core.quantity import QuantityError, format_bytes, parse_byte_size
from hami_dra_webhook.core.types import JsonObject
from hami_dra_webhook.core.vendors.families import converted_names
from hami_dra_webhook.preflight.pools import judge_pools, plugin_unrestricted
from hami_dra_webhook.preflight.report import NodeGpus, Report, Target
from hami_dra_webhook.preflight.snapshot import Failed, Read, Snapshot
from hami_dra_webhook.preflight.vendors import vendors

EXPIRY_MARGIN = datetime.timedelta(days=30)
DEVICE_NAME = re.compile(r"^hami-gpu-\d+$")
PRIVILEGED_LEVELS = ("", "privileged")
LEGACY_QUOTA_KEYS = (
    "requests.{gpu}",
    "limits.{gpu}",
    "{gpu}",
    "limits.{mem}",
    "limits.{cores}",
    "requests.{mem}",
    "requests.{cores}",
)
# HAMi DRA driver v0.1.0 (the chart's default): after a node reboot the kubelet replays
# NodePrepareResources for the claims of the node's pods, and v0.1.0 answers "claims in
# PrepareCompleted state are not supported" (Project-HAMi/k8s-dra-driver issue #45, open).
DRIVER_V0_1_0 = re.compile(r":v?0\.1\.0(@|$)")
REBOOT_HELP = (
    "after a node reboot, delete the converted pods on that node (their controllers re-create"
    " them with new claims); use a driver release that fixes k8s-dra-driver#45 once there is one"
)


def judge(snapshot: Snapshot, policy: Policy, target: Target) -> Report:
    report = Report()
    for check in CHECKS:
        check(snapshot, policy, target, report)
    vendors(snapshot, policy, report)
    _webhook(snapshot, target, report)
    return report


def _failed(read: Read[Any], check: str, report: Report) -> bool:
    if isinstance(read, Failed):
        report.add("FAIL", check, f"the API failed: {read.error}", "check the kubeconfig's access")
        return True
    return False


def _version(snapshot: Snapshot, policy: Policy, target: Target, report: Report) -> None:
    answer = snapshot.version
    if _failed(answer, "Kubernetes", report) or not isinstance(answer, dict):
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


def _api_served(snapshot: Snapshot, policy: Policy, target: Target, report: Report) -> None:
    check = "resource.k8s.io/v1"
    discovery = snapshot.dra_group
    if _failed(discovery, check, report):
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


def _capacity(snapshot: Snapshot, policy: Policy, target: Target, report: Report) -> None:
    answer = snapshot.capacity_probe
    if _failed(answer, "consumable capacity", report):
        return
    if isinstance(answer, dict) and capacity_kept(answer):
        report.add("PASS", "consumable capacity", "a dry-run claim keeps its capacity request")
    else:
        report.add(
            "FAIL",
            "consumable capacity",
            "kube-apiserver drops capacity requests: shared GPUs would become whole GPUs",
            "enable the DRAConsumableCapacity feature gate on kube-apiserver, kube-scheduler,"
            " kube-controller-manager and kubelets (default on from 1.36)",
        )


def _device_class(snapshot: Snapshot, policy: Policy, target: Target, report: Report) -> None:
    web = policy.webhook
    device_class = snapshot.device_class
    if _failed(device_class, "DeviceClass", report):
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


def _slices(snapshot: Snapshot, policy: Policy, target: Target, report: Report) -> None:
    web = policy.webhook
    slices = snapshot.driver_slices
    if _failed(slices, "driver", report):
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
        report.add("PASS", "driver", f"{total} shareable GPUs on {len(by_node)} nodes")


def _node_side(snapshot: Snapshot, policy: Policy, target: Target, report: Report) -> None:
    """What the nodes must provide: a running driver pod on every GPU node, hami-gpu-N devices
    published, CDI in the container runtime, and a namespace that admits a privileged pod."""
    nodes, pods = snapshot.nodes, snapshot.driver_pods
    if _failed(nodes, "GPU nodes", report) or _failed(pods, "driver pods", report):
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
    _driver_images(driver_pods, report)
    _devices(snapshot, policy, gpu_nodes, driver_pods, report)
    _container_runtimes(gpu_nodes, report)
    _pod_security(snapshot, report)


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
    if _failed(namespaces, "pod security", report) or not isinstance(namespaces, dict):
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
            "WARN",
            "driver image",
            f"not pinned by a digest: {', '.join(loose)}",
            "set driver.image.digest (sha256:...): a tag can be pushed again with other content",
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


def _legacy_hami(snapshot: Snapshot, policy: Policy, target: Target, report: Report) -> None:
    """Legacy HAMi may run beside DRA, on nodes of its own pool (docs/migration.md): its
    device plugin DaemonSet must be kept off the DRA pool."""
    check = "legacy HAMi"
    reads = (snapshot.daemonsets, snapshot.deployments, snapshot.webhook_configurations)
    if any(_failed(read, check, report) for read in reads):
        return
    daemonsets, deployments, configs = (r if isinstance(r, list) else [] for r in reads)
    plugins = [
        item
        for item in daemonsets
        if _looks_legacy(item, ("hami-device-plugin", "vgpu-device-plugin"))
    ]
    found = [f"device plugin DaemonSet {_where(item)}" for item in plugins]
    schedulers = [
        item for item in deployments if _looks_legacy(item, ("hami-scheduler", "vgpu-scheduler"))
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


def _gpu_pools(snapshot: Snapshot, policy: Policy, target: Target, report: Report) -> None:
    if _failed(snapshot.inventory, "GPU pools", report):
        return
    if isinstance(snapshot.inventory, Inventory):
        judge_pools(snapshot.inventory, report)


def _readable(memory: object) -> str:
    try:
        return format_bytes(parse_byte_size(str(memory)))
    except QuantityError:
        return str(memory)


def _looks_legacy(item: JsonObject, names: tuple[str, ...]) -> bool:
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


def _where(item: JsonObject) -> str:
    metadata = item.get("metadata") or {}
    return f"{metadata.get('namespace')}/{metadata.get('name')}"


def _extended_resources(snapshot: Snapshot, policy: Policy, target: Target, report: Report) -> None:
    check = "extended resources"
    classes = snapshot.device_classes
    if _failed(classes, check, report):
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


def _quotas(snapshot: Snapshot, policy: Policy, target: Target, report: Report) -> None:
    quotas = snapshot.quotas
    if _failed(quotas, "quotas", report):
        return
    n = policy.nvidia
    keys = {
        k.format(gpu=n.resource_count_name, mem=n.resource_memory_name, cores=n.resource_core_name)
        for k in LEGACY_QUOTA_KEYS
    }
    found = []
    for quota in quotas if isinstance(quotas, list) else []:
        counted = sorted(k for k in ((quota.get("spec") or {}).get("hard") or {}) if k in keys)
        if counted:
            found.append(f"{_where(quota)} ({', '.join(counted)})")
    if found:
        report.add(
            "WARN",
            "quotas",
            "ResourceQuotas count legacy resources, which converted pods no longer carry: "
            + "; ".join(found),
            "count DRA instead: quota on resourceclaims, or"
            " <deviceclass>.deviceclass.resource.k8s.io/devices",
        )
    else:
        report.add("PASS", "quotas", "no ResourceQuota counts legacy resources")


def _webhook(snapshot: Snapshot, target: Target, report: Report) -> None:
    config = snapshot.webhook_configuration
    if _failed(config, "webhook", report):
        return
    if not isinstance(config, dict):  # Missing
        report.add(
            "FAIL",
            "webhook",
            f"MutatingWebhookConfiguration {target.webhook_configuration} does not exist",
            "helm install hami-dra-webhook charts/hami-dra-webhook",
        )
        return
    client = ((config.get("webhooks") or [{}])[0].get("clientConfig")) or {}
    bundle = base64.b64decode(client.get("caBundle") or "")
    secret = snapshot.tls_secret
    if _failed(secret, "webhook certificate", report):
        return
    data = (secret.get("data") or {}) if isinstance(secret, dict) else {}
    problem = certificate_problem(bundle, base64.b64decode(data.get("tls.crt") or ""))
    if problem:
        report.add(
            "FAIL",
            "webhook certificate",
            problem,
            "with selfManaged certificates, restart the webhook pods; else renew the Secret",
        )
    else:
        report.add(
            "PASS",
            "webhook certificate",
            "the caBundle verifies the serving certificate, valid for more than 30 days",
        )
    if snapshot.webhook_url is not None:
        _webhook_url(snapshot, report)
    else:
        _webhook_service(snapshot, target, report)
    _preview(snapshot, bundle, target, report)


def _preview(snapshot: Snapshot, bundle: bytes, target: Target, report: Report) -> None:
    """The workloads' preview: there, and trusting the same CA as the pod webhook (it is
    failurePolicy Ignore: a wrong caBundle would only make `kubectl apply` silent)."""
    config = snapshot.preview_configuration
    if _failed(config, "workloads' preview", report):
        return
    name = target.webhook_configuration
    if not isinstance(config, dict):
        report.add(
            "WARN",
            "workloads' preview",
            f"no ValidatingWebhookConfiguration {name}: kubectl apply of a workload does not"
            " say what its pods become, and their refusals show only as FailedCreate events",
            "helm upgrade with workloadPreview.enabled=true (the default from chart 0.2.0)",
        )
        return
    webhooks = config.get("webhooks") or []
    stale = [
        str(w.get("name"))
        for w in webhooks
        if base64.b64decode((w.get("clientConfig") or {}).get("caBundle") or "") != bundle
    ]
    if stale:
        report.add(
            "WARN",
            "workloads' preview",
            f"{', '.join(stale)} of ValidatingWebhookConfiguration {name} does not trust the"
            " pod webhook's CA: kubectl apply gets no preview (failurePolicy Ignore)",
            "with selfManaged certificates, restart the webhook pods; with cert-manager, check"
            " its cainjector",
        )
    else:
        report.add(
            "PASS",
            "workloads' preview",
            f"kubectl apply of a workload says what its pods become ({len(webhooks)} webhooks)",
        )


def _webhook_url(snapshot: Snapshot, report: Report) -> None:
    answer = snapshot.webhook_url
    assert answer is not None
    url = answer.url
    if answer.status is None:
        report.add(
            "WARN",
            "webhook url",
            f"kube-apiserver calls {url}; not reachable from here ({answer.unreachable})",
            "check it from where kube-apiserver runs",
        )
    elif answer.status == 200:
        report.add("PASS", "webhook url", f"kube-apiserver calls {url}; its /readyz answers 200")
    else:
        report.add(
            "FAIL",
            "webhook url",
            f"kube-apiserver calls {url}; its /readyz answers {answer.status}",
            "see the webhook's log and /readyz body",
        )


def _webhook_service(snapshot: Snapshot, target: Target, report: Report) -> None:
    slices = snapshot.endpoint_slices
    if _failed(slices, "webhook service", report):
        return
    ready = sum(
        1
        for s in (slices if isinstance(slices, list) else [])
        for e in s.get("endpoints") or []
        if (e.get("conditions") or {}).get("ready")
    )
    service = f"{target.namespace}/{target.service}"
    if ready:
        report.add("PASS", "webhook service", f"{ready} ready endpoint(s) behind {service}")
    else:
        report.add(
            "FAIL",
            "webhook service",
            f"no ready endpoint behind {service}",
            f"kubectl -n {target.namespace} get pods; GPU pods are refused while it is down"
            " (failurePolicy Fail)",
        )


def certificate_problem(bundle: bytes, cert_pem: bytes) -> str:
    if not bundle:
        return "the webhook configuration has no caBundle yet"
    if not cert_pem:
        return "the certificate Secret holds no tls.crt"
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        cas = x509.load_pem_x509_certificates(bundle)
    except ValueError as error:
        return f"unreadable certificate: {error}"
    if not any(_issued_by(cert, ca) for ca in cas):
        return "the caBundle does not verify the serving certificate"
    left = cert.not_valid_after_utc - datetime.datetime.now(datetime.UTC)
    if left < EXPIRY_MARGIN:
        return f"the serving certificate expires in {left.days} days"
    return ""


def _issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


CHECKS: tuple[Callable[[Snapshot, Policy, Target, Report], None], ...] = (
    _version,
    _api_served,
    _capacity,
    _device_class,
    _slices,
    _node_side,
    _legacy_hami,
    _gpu_pools,
    _extended_resources,
    _quotas,
)
