"""The chart's own DRA driver, found by what only it can be (issue 61): the ServiceAccount its
ClusterRoleBinding (`<release>-driver`, cluster-scoped: no tenant writes it) names, in that
ServiceAccount's namespace, on a pod whose controller is the DaemonSet `<release>-driver`. A
label is never enough: any tenant can write `app.kubernetes.io/component=dra-driver` on a pod
of its own namespace, and a move must not take that pod for the driver (nor run its canary in
the tenant's namespace, with the tenant's image).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.kube.port import ApiError, KubeApi, paths


def driver_name(release: str) -> str:
    """The name the chart gives its driver's DaemonSet, ServiceAccount and ClusterRoleBinding."""
    return f"{release}-driver"[:63].rstrip("-")


def monitor_name(release: str) -> str:
    """The same names of the chart's node monitor (found as its driver is, for `check`)."""
    return f"{release}-monitor"[:63].rstrip("-")


@dataclass(frozen=True, slots=True)
class ChartDriver:
    namespace: str
    service_account: str
    daemonset: str

    @property
    def shown(self) -> str:
        return f"DaemonSet {self.namespace}/{self.daemonset}"

    def runs(self, pod: JsonObject) -> bool:
        """Whether the pod is one of this driver's: its namespace, ServiceAccount and owner."""
        metadata, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        owners = metadata.get("ownerReferences") or []
        owned = any(
            isinstance(o, dict)
            and o.get("controller")
            and o.get("kind") == "DaemonSet"
            and o.get("name") == self.daemonset
            for o in owners
        )
        return (
            owned
            and metadata.get("namespace") == self.namespace
            and spec.get("serviceAccountName") == self.service_account
        )


async def read_chart_driver(
    api: KubeApi, release: str, timeout: float, name_of: Callable[[str], str] = driver_name
) -> ChartDriver | None:
    """The release's driver (`name_of=monitor_name`: its node monitor), from its
    ClusterRoleBinding; None when the chart installed none."""
    name = name_of(release)
    try:
        binding = await api.get_path(paths.cluster_role_binding(name), timeout=timeout)
    except ApiError as error:
        if error.status == 404:
            return None
        raise
    for subject in binding.get("subjects") or []:
        if isinstance(subject, dict) and subject.get("kind") == "ServiceAccount":
            namespace, account = subject.get("namespace"), subject.get("name")
            if isinstance(namespace, str) and isinstance(account, str) and namespace and account:
                return ChartDriver(namespace, account, name)
    return None


async def chart_driver_pods(
    api: KubeApi, driver: ChartDriver, timeout: float, node: str = ""
) -> list[JsonObject]:
    """The driver's pods (on `node`, when given), read from its own namespace only."""
    query = [("fieldSelector", f"spec.nodeName={node}")] if node else []
    pods = await api.list_path(paths.pods(driver.namespace), query, timeout=timeout)
    return [pod for pod in pods if isinstance(pod, dict) and driver.runs(pod)]
