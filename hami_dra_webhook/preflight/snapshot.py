"""Everything `check` judges, read from the cluster once: each object or list as the API gave
it, `Missing` where the API answered 404, or `Failed` where it failed otherwise (its check then
says so). The judging (preflight/checks.py) does no I/O, so it is tested over plain data."""

from __future__ import annotations

import asyncio
import base64
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypeVar, Union

from hami_dra_webhook.cluster.moves.chart_driver import (
    chart_driver_pods,
    monitor_name,
    read_chart_driver,
)
from hami_dra_webhook.cluster.moves.inventory import read_inventory
from hami_dra_webhook.cluster.moves.legacy_node_config import device_plugin_configs
from hami_dra_webhook.cluster.quota.usage import QuotaLine, read_gpu_quotas
from hami_dra_webhook.cluster.state import cluster_policy, probe_template
from hami_dra_webhook.core.migration.pool_plan import Inventory
from hami_dra_webhook.core.migration.pools import Scope
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.kube.port import ApiError, KubeApi, paths
from hami_dra_webhook.preflight.family_nodes import families_to_check
from hami_dra_webhook.preflight.report import Installation, Report

T = TypeVar("T")


@dataclass(frozen=True)
class Missing:
    """The API answered 404."""


@dataclass(frozen=True)
class Failed:
    """The API failed otherwise; `error` says how."""

    error: str


MISSING = Missing()
Read: TypeAlias = Union[T, Missing, Failed]  # noqa: UP007 (a generic alias needs Union)


@dataclass(frozen=True)
class UrlAnswer:
    """A webhook called by URL: the status its /readyz answered, or why it was not reachable."""

    url: str
    status: int | None = None
    unreachable: str = ""


@dataclass
class Snapshot:
    version: Read[JsonObject] = MISSING
    dra_group: Read[JsonObject] = MISSING  # discovery of resource.k8s.io/v1
    capacity_probe: Read[JsonObject] = MISSING  # a dry-run template with a capacity request
    device_class: Read[JsonObject] = MISSING  # the class the templates name
    device_classes: Read[list[JsonObject]] = field(default_factory=list)
    driver_slices: Read[list[JsonObject]] = field(default_factory=list)
    nodes: Read[list[JsonObject]] = field(default_factory=list)
    driver_pods: Read[list[JsonObject]] = field(default_factory=list)
    # The chart's node monitor pods; None: the release installed no monitor.
    monitor_pods: Read[list[JsonObject]] | None = None
    # The namespaces of the driver pods (or the chart's, without pods), by name.
    namespaces: Read[dict[str, JsonObject]] = field(default_factory=dict)
    daemonsets: Read[list[JsonObject]] = field(default_factory=list)
    # The legacy device plugin's per-node config.json, by where it came from.
    legacy_configs: Read[list[tuple[str, str]]] = field(default_factory=list)
    deployments: Read[list[JsonObject]] = field(default_factory=list)
    webhook_configurations: Read[list[JsonObject]] = field(default_factory=list)
    quotas: Read[list[JsonObject]] = field(default_factory=list)
    # What each GPU quota holds now (cluster/quota/usage.py).
    gpu_quotas: Read[list[QuotaLine]] = field(default_factory=list)
    webhook_configuration: Read[JsonObject] = MISSING  # the chart's
    preview_configuration: Read[JsonObject] = MISSING  # its workloads' preview (validating)
    tls_secret: Read[JsonObject] = MISSING
    endpoint_slices: Read[list[JsonObject]] = field(default_factory=list)
    webhook_url: UrlAnswer | None = None  # when the webhook is called by URL
    # Another family's driver -> its slices; its DeviceClass -> whether it exists.
    vendor_slices: dict[str, Read[list[JsonObject]]] = field(default_factory=dict)
    vendor_classes: dict[str, Read[JsonObject]] = field(default_factory=dict)
    # The GPU pools of a cluster in migration (preflight/pools.py).
    inventory: Read[Inventory] = MISSING
    # The policy with the cluster's facts (card sizes from the drivers' slices), as every tool
    # judges with; None: not read (the configured one is used).
    policy: Policy | None = None

    @property
    def scope(self) -> Scope:
        """The migration scope the installed webhook applies (`all` when not installed)."""
        config = self.webhook_configuration
        webhooks = config.get("webhooks") or [] if isinstance(config, dict) else []
        return Scope.of_webhook(webhooks[0]) if webhooks else Scope("all")


async def _every(pages: AsyncIterator[list[JsonObject]]) -> list[JsonObject]:
    return [item async for page in pages for item in page]


async def _read(call: Awaitable[T]) -> Read[T]:
    try:
        return await call
    except ApiError as error:
        return MISSING if error.status == 404 else Failed(str(error))


async def gather(api: KubeApi, policy: Policy, target: Installation, timeout: float) -> Snapshot:
    """Read the cluster once (each list once, one after another: a preflight, not a load)."""
    web = policy.webhook
    snapshot = Snapshot()
    snapshot.version = await _read(api.version(timeout=timeout))
    snapshot.dra_group = await _read(api.get_path(paths.DRA_GROUP, timeout=timeout))
    snapshot.capacity_probe = await _capacity_probe(api, policy, target.namespace, timeout)
    snapshot.device_class = await _read(
        api.get_path(paths.device_class(web.device_class_name), timeout=timeout)
    )
    snapshot.device_classes = await _read(api.list_device_classes(timeout=timeout))
    snapshot.driver_slices = await _read(api.list_resource_slices(web.driver_name, timeout=timeout))
    snapshot.nodes = await _read(api.list_path(paths.NODES, [], timeout=timeout))
    slices = snapshot.driver_slices
    listed = {web.driver_name: slices} if isinstance(slices, list) else None
    known = await _read(cluster_policy(api, policy, timeout, listed))
    if isinstance(known, Policy):
        snapshot.policy = policy = known
    # The chart's own driver only (cluster/moves/chart_driver.py): a tenant's pod labelled as one is
    # not it, and its namespace is not the driver's.
    snapshot.driver_pods = await _read(_driver_pods(api, target, timeout))
    snapshot.monitor_pods = await _read(_monitor_pods(api, target, timeout))
    if snapshot.monitor_pods is MISSING:
        snapshot.monitor_pods = None
    snapshot.namespaces = await _namespaces(api, snapshot.driver_pods, target, timeout)
    snapshot.daemonsets = await _read(
        _every(api.workload_pages("DaemonSet", None, timeout=timeout))
    )
    if isinstance(snapshot.daemonsets, list):
        snapshot.legacy_configs = await _read(
            device_plugin_configs(api, snapshot.daemonsets, timeout)
        )
    snapshot.deployments = await _read(
        _every(api.workload_pages("Deployment", None, timeout=timeout))
    )
    snapshot.webhook_configurations = await _read(
        api.list_path(paths.WEBHOOKS, [], timeout=timeout)
    )
    snapshot.quotas = await _read(api.list_path(paths.RESOURCE_QUOTAS, [], timeout=timeout))
    snapshot.gpu_quotas = await _read(read_gpu_quotas(api, policy, timeout))
    await _webhook(api, snapshot, target, timeout)
    await _vendors(api, snapshot, policy, timeout)
    slices, nodes = snapshot.driver_slices, snapshot.nodes
    read = (slices, nodes) if isinstance(slices, list) and isinstance(nodes, list) else None
    snapshot.inventory = await _read(read_inventory(api, policy, snapshot.scope, timeout, read))
    return snapshot


async def _driver_pods(api: KubeApi, target: Installation, timeout: float) -> list[JsonObject]:
    driver = await read_chart_driver(api, target.webhook_configuration, timeout)
    return [] if driver is None else await chart_driver_pods(api, driver, timeout)


async def _capacity_probe(
    api: KubeApi, policy: Policy, namespace: str, timeout: float
) -> Read[JsonObject]:
    """A dry-run template with a capacity request, in the chart's namespace, or in `default`
    where that one does not exist (not installed yet, or a wrong -n): the 404 of an absent
    namespace says nothing of the feature gate (issue 65). MISSING: neither exists."""
    answer: Read[JsonObject] = MISSING
    for where in dict.fromkeys((namespace, "default")):
        probe = probe_template(policy, where)
        answer = await _read(api.create_template(where, probe, dry_run=True, timeout=timeout))
        if answer is not MISSING:
            return answer
    return answer


async def _monitor_pods(api: KubeApi, target: Installation, timeout: float) -> list[JsonObject]:
    monitor = await read_chart_driver(api, target.webhook_configuration, timeout, monitor_name)
    if monitor is None:
        raise ApiError(404, "NotFound", "no node monitor")  # read as MISSING: not installed
    return await chart_driver_pods(api, monitor, timeout)


async def _namespaces(
    api: KubeApi, pods: Read[list[JsonObject]], target: Installation, timeout: float
) -> Read[dict[str, JsonObject]]:
    names = {str(p["metadata"].get("namespace")) for p in pods} if isinstance(pods, list) else set()
    found: dict[str, JsonObject] = {}
    for name in sorted(names or {target.namespace}):
        namespace = await _read(api.get_path(paths.namespace(name), timeout=timeout))
        if isinstance(namespace, Failed):
            return namespace
        found[name] = namespace if isinstance(namespace, dict) else {}
    return found


async def _webhook(api: KubeApi, snapshot: Snapshot, target: Installation, timeout: float) -> None:
    config = await _read(
        api.get_webhook_configuration(target.webhook_configuration, timeout=timeout)
    )
    snapshot.webhook_configuration = config
    if not isinstance(config, dict):
        return
    snapshot.preview_configuration = await _read(
        api.get_webhook_configuration(
            target.webhook_configuration, timeout=timeout, validating=True
        )
    )
    snapshot.tls_secret = await _read(
        api.get_secret(target.namespace, target.tls_secret, timeout=timeout)
    )
    client = ((config.get("webhooks") or [{}])[0].get("clientConfig")) or {}
    if client.get("url"):
        bundle = base64.b64decode(client.get("caBundle") or "")
        snapshot.webhook_url = await asyncio.to_thread(
            _ask_readyz, str(client["url"]), bundle, timeout
        )
        return
    snapshot.endpoint_slices = await _read(
        api.list_path(
            paths.endpoint_slices(target.namespace),
            [("labelSelector", f"kubernetes.io/service-name={target.service}")],
            timeout=timeout,
        )
    )


def _ask_readyz(url: str, bundle: bytes, timeout: float) -> UrlAnswer:
    """A webhook called by URL (admission.url): ask its /readyz, trusting only the caBundle."""
    parts = urllib.parse.urlsplit(url)
    readyz = urllib.parse.urlunsplit((parts.scheme, parts.netloc, "/readyz", "", ""))
    try:
        context = ssl.create_default_context(cadata=bundle.decode("ascii", "replace"))
        with urllib.request.urlopen(readyz, context=context, timeout=min(timeout, 5)) as answer:
            return UrlAnswer(url, status=answer.status)
    except urllib.error.HTTPError as error:
        return UrlAnswer(url, status=error.code)
    except (OSError, ssl.SSLError, ValueError) as error:
        return UrlAnswer(url, unreachable=str(error))


async def _vendors(api: KubeApi, snapshot: Snapshot, policy: Policy, timeout: float) -> None:
    """The slices and DeviceClass of each other family that is converted or present on a node
    (preflight/vendors.py decides which are)."""
    nodes = snapshot.nodes if isinstance(snapshot.nodes, list) else []
    for family, _ in families_to_check(nodes, policy):
        if family.driver is None:
            continue
        snapshot.vendor_slices[family.driver] = await _read(
            api.list_resource_slices(family.driver, timeout=timeout)
        )
        if family.converted and family.device_class:
            snapshot.vendor_classes[family.device_class] = await _read(
                api.get_path(paths.device_class(family.device_class), timeout=timeout)
            )


def failed(read: Read[Any], check: str, report: Report) -> bool:
    if isinstance(read, Failed):
        report.add("FAIL", check, f"the API failed: {read.error}", "check the kubeconfig's access")
        return True
    return False
