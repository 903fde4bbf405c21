"""Preflight of a live cluster: is it ready for hami-dra-webhook, and is the webhook healthy?"""

from __future__ import annotations

import asyncio
import base64
import datetime
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Literal

from cryptography import x509
from cryptography.exceptions import InvalidSignature

from hami_dra_webhook.cluster.state import capacity_kept, probe_template
from hami_dra_webhook.core.policy import Policy
from hami_dra_webhook.core.quantity import QuantityError, format_bytes, parse_byte_size
from hami_dra_webhook.core.types import JsonObject
from hami_dra_webhook.kube.port import ApiError, KubeApi, paths
from hami_dra_webhook.migrate.vendor_check import vendors

Level = Literal["PASS", "WARN", "FAIL"]
LEVELS: dict[str, int] = {"PASS": 0, "WARN": 1, "FAIL": 2}
EXPIRY_MARGIN = datetime.timedelta(days=30)


@dataclass
class Line:
    level: Level
    check: str
    detail: str
    fix: str = ""


@dataclass
class NodeGpus:
    node: str
    gpus: int
    memory: list[str]
    shareable: bool


@dataclass
class Target:
    namespace: str = "hami-system"
    webhook_configuration: str = "hami-dra-webhook"
    service: str = "hami-dra-webhook"
    tls_secret: str = "hami-dra-webhook-tls"


@dataclass
class Report:
    lines: list[Line] = field(default_factory=list)
    nodes: list[NodeGpus] = field(default_factory=list)

    def add(self, level: Level, check: str, detail: str, fix: str = "") -> None:
        self.lines.append(Line(level, check, detail, fix))

    @property
    def worst(self) -> Level:
        return max((line.level for line in self.lines), key=LEVELS.__getitem__, default="PASS")

    def as_json(self) -> JsonObject:
        return {
            "worst": self.worst,
            "checks": [asdict(x) for x in self.lines],
            "nodes": [asdict(n) for n in self.nodes],
        }


LEGACY_QUOTA_KEYS = (
    "requests.{gpu}",
    "limits.{gpu}",
    "{gpu}",
    "limits.{mem}",
    "limits.{cores}",
    "requests.{mem}",
    "requests.{cores}",
)


async def run_checks(api: KubeApi, policy: Policy, target: Target, timeout: float = 20.0) -> Report:
    report = Report()
    checks: list[Callable[[KubeApi, Policy, Target, Report, float], Awaitable[None]]] = [
        _version,
        _api_served,
        _capacity,
        _device_class,
        _slices,
        _node_side,
        _legacy_hami,
        _extended_resources,
        _quotas,
        vendors,
        _webhook,
    ]
    for check in checks:
        try:
            await check(api, policy, target, report, timeout)
        except ApiError as error:
            name = check.__name__.strip("_").replace("_", " ")
            report.add(
                "FAIL",
                name,
                f"the API failed: {error}",
                "check access rights of the kubeconfig",
            )
    return report


async def _version(
    api: KubeApi, policy: Policy, target: Target, report: Report, timeout: float
) -> None:
    answer = await api.version(timeout=timeout)
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


async def _api_served(
    api: KubeApi, policy: Policy, target: Target, report: Report, timeout: float
) -> None:
    try:
        discovery = await api.get_path(paths.DRA_GROUP, timeout=timeout)
    except ApiError as error:
        if error.status == 404:
            report.add("FAIL", "resource.k8s.io/v1", "not served", "use Kubernetes 1.34 or later")
            return
        raise
    names = {r.get("name") for r in discovery.get("resources") or []}
    if "resourceclaimtemplates" in names:
        report.add("PASS", "resource.k8s.io/v1", "served, with ResourceClaimTemplates")
    else:
        report.add(
            "FAIL",
            "resource.k8s.io/v1",
            "served without resourceclaimtemplates",
            "enable DynamicResourceAllocation",
        )


async def _capacity(
    api: KubeApi, policy: Policy, target: Target, report: Report, timeout: float
) -> None:
    answer = await api.create_template(
        target.namespace, probe_template(policy, target.namespace), dry_run=True, timeout=timeout
    )
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


async def _device_class(
    api: KubeApi, policy: Policy, target: Target, report: Report, timeout: float
) -> None:
    web = policy.webhook
    try:
        device_class = await api.get_path(
            paths.device_class(web.device_class_name), timeout=timeout
        )
    except ApiError as error:
        if error.status == 404:
            report.add(
                "FAIL",
                "DeviceClass",
                f"{web.device_class_name} does not exist",
                "install the chart with deviceClass.create=true",
            )
            return
        raise
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


async def _slices(
    api: KubeApi, policy: Policy, target: Target, report: Report, timeout: float
) -> None:
    web = policy.webhook
    slices = await api.list_resource_slices(web.driver_name, timeout=timeout)
    by_node: dict[str, NodeGpus] = {}
    missing: set[str] = set()
    for resource_slice in slices:
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


DRIVER_PODS = "app.kubernetes.io/component=dra-driver"
# How clusters label NVIDIA GPU nodes: GPU feature discovery, Node Feature Discovery's PCI
# vendor label (10de is NVIDIA); the chart's driver.nodeAffinity uses the same two.
GPU_NODE_LABELS = ("nvidia.com/gpu.present", "feature.node.kubernetes.io/pci-10de.present")
DEVICE_NAME = re.compile(r"^hami-gpu-\d+$")
PRIVILEGED_LEVELS = ("", "privileged")


async def _node_side(
    api: KubeApi, policy: Policy, target: Target, report: Report, timeout: float
) -> None:
    """What the nodes must provide: a running driver pod on every GPU node, hami-gpu-N devices
    published, CDI in the container runtime, and a namespace that admits a privileged pod."""
    nodes = await api.list_path(paths.NODES, [], timeout=timeout)
    gpu_nodes = {
        str(node["metadata"]["name"]): node
        for node in nodes
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
    pods = await api.list_path(paths.ALL_PODS, [("labelSelector", DRIVER_PODS)], timeout=timeout)
    driver_pods = {
        str((pod.get("spec") or {}).get("nodeName")): pod
        for pod in pods
        if (pod.get("spec") or {}).get("nodeName")
    }
    _driver_pods(gpu_nodes, driver_pods, report)
    _driver_images(driver_pods, report)
    slices = await api.list_resource_slices(policy.webhook.driver_name, timeout=timeout)
    devices: dict[str, list[str]] = {}
    for resource_slice in slices:
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
        detail = f"hami-gpu-N devices on {with_pods} node(s) with a driver pod"
        report.add("PASS", "devices", detail)
    _container_runtimes(gpu_nodes, report)
    namespaces = sorted({str(p["metadata"].get("namespace")) for p in pods} or {target.namespace})
    strict = []
    for namespace in namespaces:
        found = await api.get_path(paths.namespace(namespace), timeout=timeout)
        labels = (found.get("metadata") or {}).get("labels") or {}
        level = str(labels.get("pod-security.kubernetes.io/enforce", ""))
        if level not in PRIVILEGED_LEVELS:
            strict.append(f"{namespace} ({level})")
    if strict:
        report.add(
            "FAIL",
            "pod security",
            f"the driver is privileged, but {', '.join(strict)} enforces less",
            "put the driver in a namespace of its own (driver.namespace, driver.createNamespace)",
        )
    else:
        report.add("PASS", "pod security", f"{', '.join(namespaces)} admits the privileged driver")


# HAMi DRA driver v0.1.0 (the chart's default): after a node reboot the kubelet replays
# NodePrepareResources for the claims of the node's pods, and v0.1.0 answers "claims in
# PrepareCompleted state are not supported" (Project-HAMi/k8s-dra-driver issue #45, open).
DRIVER_V0_1_0 = re.compile(r":v?0\.1\.0(@|$)")
REBOOT_HELP = (
    "after a node reboot, delete the converted pods on that node (their controllers re-create"
    " them with new claims); use a driver release that fixes k8s-dra-driver#45 once there is one"
)


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


async def _legacy_hami(
    api: KubeApi, policy: Policy, target: Target, report: Report, timeout: float
) -> None:
    found = []
    for item in await api.list_workloads("DaemonSet", None, timeout=timeout):
        if _looks_legacy(item, ("hami-device-plugin", "vgpu-device-plugin")):
            found.append(f"device plugin DaemonSet {_where(item)}")
    for item in await api.list_workloads("Deployment", None, timeout=timeout):
        if _looks_legacy(item, ("hami-scheduler", "vgpu-scheduler")):
            found.append(f"scheduler Deployment {_where(item)}")
    for config in await api.list_path(paths.WEBHOOKS, [], timeout=timeout):
        if any("vgpu.hami.io" in str(w.get("name")) for w in config.get("webhooks") or []):
            found.append(f"webhook {config['metadata']['name']}")
    if found:
        report.add(
            "FAIL",
            "legacy HAMi",
            "still running: " + "; ".join(found),
            "uninstall legacy HAMi first: the two modes must not share a cluster",
        )
    else:
        report.add("PASS", "legacy HAMi", "not running")


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


async def _extended_resources(
    api: KubeApi, policy: Policy, target: Target, report: Report, timeout: float
) -> None:
    legacy = set(policy.legacy_resource_names)
    clashes = [
        f"{c['metadata']['name']} ({c['spec']['extendedResourceName']})"
        for c in await api.list_device_classes(timeout=timeout)
        if (c.get("spec") or {}).get("extendedResourceName") in legacy
    ]
    if clashes:
        report.add(
            "WARN",
            "extended resources",
            "DeviceClasses claim legacy names: " + ", ".join(clashes),
            "remove extendedResourceName there: kube-scheduler would give unconverted pods"
            " whole GPUs",
        )
    else:
        report.add("PASS", "extended resources", "no DeviceClass claims a legacy resource name")


async def _quotas(
    api: KubeApi, policy: Policy, target: Target, report: Report, timeout: float
) -> None:
    n = policy.nvidia
    keys = {
        k.format(gpu=n.resource_count_name, mem=n.resource_memory_name, cores=n.resource_core_name)
        for k in LEGACY_QUOTA_KEYS
    }
    found = []
    for quota in await api.list_path(paths.RESOURCE_QUOTAS, [], timeout=timeout):
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


async def _webhook(
    api: KubeApi, policy: Policy, target: Target, report: Report, timeout: float
) -> None:
    try:
        config = await api.get_webhook_configuration(target.webhook_configuration, timeout=timeout)
    except ApiError as error:
        if error.status == 404:
            report.add(
                "FAIL",
                "webhook",
                f"MutatingWebhookConfiguration {target.webhook_configuration} does not exist",
                "helm install hami-dra-webhook charts/hami-dra-webhook",
            )
            return
        raise
    bundle = base64.b64decode(
        ((config.get("webhooks") or [{}])[0].get("clientConfig") or {}).get("caBundle") or ""
    )
    secret = await api.get_secret(target.namespace, target.tls_secret, timeout=timeout)
    cert_pem = base64.b64decode((secret.get("data") or {}).get("tls.crt") or "")
    problem = _certificate_problem(bundle, cert_pem)
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
    url = ((config.get("webhooks") or [{}])[0].get("clientConfig") or {}).get("url")
    if url:
        await asyncio.to_thread(_webhook_url, str(url), bundle, report, timeout)
        return
    slices = await api.list_path(
        paths.endpoint_slices(target.namespace),
        [("labelSelector", f"kubernetes.io/service-name={target.service}")],
        timeout=timeout,
    )
    ready = sum(
        1
        for s in slices
        for e in s.get("endpoints") or []
        if (e.get("conditions") or {}).get("ready")
    )
    if ready:
        report.add(
            "PASS",
            "webhook service",
            f"{ready} ready endpoint(s) behind {target.namespace}/{target.service}",
        )
    else:
        report.add(
            "FAIL",
            "webhook service",
            f"no ready endpoint behind {target.namespace}/{target.service}",
            f"kubectl -n {target.namespace} get pods; GPU pods are refused while it is down"
            " (failurePolicy Fail)",
        )


def _webhook_url(url: str, bundle: bytes, report: Report, timeout: float) -> None:
    """A webhook called by URL (admission.url): ask its /readyz, trusting only the caBundle."""
    parts = urllib.parse.urlsplit(url)
    readyz = urllib.parse.urlunsplit((parts.scheme, parts.netloc, "/readyz", "", ""))
    try:
        context = ssl.create_default_context(cadata=bundle.decode("ascii", "replace"))
        with urllib.request.urlopen(readyz, context=context, timeout=min(timeout, 5)) as answer:
            status = answer.status
    except urllib.error.HTTPError as error:
        status = error.code
    except (OSError, ssl.SSLError, ValueError) as error:
        report.add(
            "WARN",
            "webhook url",
            f"kube-apiserver calls {url}; not reachable from here ({error})",
            "check it from where kube-apiserver runs",
        )
        return
    if status == 200:
        report.add("PASS", "webhook url", f"kube-apiserver calls {url}; its /readyz answers 200")
    else:
        report.add(
            "FAIL",
            "webhook url",
            f"kube-apiserver calls {url}; its /readyz answers {status}",
            "see the webhook's log and /readyz body",
        )


def _certificate_problem(bundle: bytes, cert_pem: bytes) -> str:
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
