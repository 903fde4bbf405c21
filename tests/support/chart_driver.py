"""The chart's driver objects as driver.yaml makes them (its ClusterRoleBinding naming its
ServiceAccount, and its DaemonSet), for tests on a control plane without the chart: what
cluster/moves/chart_driver.py trusts as the driver."""

from __future__ import annotations

from typing import Any


def driver_binding(name: str, namespace: str) -> dict[str, Any]:
    """The ClusterRoleBinding `name` of the driver's ServiceAccount `namespace/name`."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    }


def driver_daemonset(name: str, node: str, image: str) -> dict[str, Any]:
    """The DaemonSet `name` running its ServiceAccount `name` on `node` only, every taint
    tolerated; its pods labelled `app.kubernetes.io/instance=<name>`."""
    labels = {"app.kubernetes.io/component": "dra-driver", "app.kubernetes.io/instance": name}
    pod_spec = {
        "serviceAccountName": name,
        "nodeSelector": {"kubernetes.io/hostname": node},
        "tolerations": [{"operator": "Exists"}],
        "containers": [{"name": "plugin", "image": image}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }
