"""Issue 64, item 2, against the real kube-apiserver and kube-scheduler (1.36 and 1.37): a
node's `hami.io/device-cordon` becomes DeviceTaintRules the real scheduler honours (1.37
serves them; 1.36 does not by default, and a move says so before changing anything), and
`check` and `scan --cluster` name each node and what it loses under DRA of the legacy device
plugin's per-node config (read where its DaemonSet reads it: the ConfigMap at /config)."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from hami_dra_webhook.cli.main import main
from hami_dra_webhook.cluster.moves.device_cordons import DeviceCordons, MoveCordons
from hami_dra_webhook.core.migration.move_state import MoveError
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from tests.support.cluster import Cluster, api_for
from tests.support.loop import run

pytestmark = pytest.mark.e2e_on(versions=("1.36", "1.37"))

DRIVER = "hami-core-gpu.project-hami.io"
CARD_0 = "GPU-1c000000-0000-4000-8000-000000000000"
CARD_1 = "GPU-1c000001-0000-4000-8000-000000000001"
CARD_2 = "GPU-a1000002-0000-4000-8000-000000000002"
CORDON = "hami.io/device-cordon"
TEST_CLASS = "e2e-device-cordon"  # the driver's devices; the chart's class is not installed here


@pytest.fixture
def device_class(cluster: Cluster) -> Iterator[str]:
    """A DeviceClass of the driver's devices, for this module's claims."""
    selector = {"cel": {"expression": f'device.driver == "{DRIVER}"'}}
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": TEST_CLASS},
        "spec": {"selectors": [selector]},
    }
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(body))
    try:
        yield TEST_CLASS
    finally:
        cluster.kubectl("delete", "deviceclass", TEST_CLASS, "--ignore-not-found")


def rules(cluster: Cluster) -> list[dict[str, Any]]:
    found = cluster.kubectl(
        "get", "devicetaintrules", "-l", f"hami.io/device-cordon-node={cluster.node.name}",
        "-o", "json",
    )  # fmt: skip
    items: list[dict[str, Any]] = json.loads(found.stdout)["items"]
    return items


def cordons(cluster: Cluster) -> Iterator[DeviceCordons]:
    api = api_for(cluster.plane.admin_kubeconfig)
    try:
        yield DeviceCordons(api, DEFAULT_POLICY, cluster.node.name, 10)
    finally:
        run(api.close())


@pytest.fixture
def cordoner(cluster: Cluster) -> Iterator[DeviceCordons]:
    yield from cordons(cluster)


def _slices(cordoner: DeviceCordons) -> list[dict[str, Any]]:
    return run(cordoner.api.list_resource_slices(DRIVER, timeout=10))


def _claimed_pod(namespace: str, uuid: str) -> list[dict[str, Any]]:
    """A claim template for the card with this UUID (the whole card), and a pod that uses it
    (its claim goes with it)."""
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "card"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": TEST_CLASS,
                                "selectors": [
                                    {
                                        "cel": {
                                            "expression": f'device.attributes["{DRIVER}"].uuid == "{uuid}"'
                                        }
                                    }
                                ],
                            },
                        }
                    ]
                }
            }
        },
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "on-card"},
        "spec": {
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "card"}],
        },
    }
    return [claim, pod]


def _unschedulable_for_the_taint(cluster: Cluster, namespace: str) -> None:
    """kube-scheduler tried the pod and said no (not merely: not yet)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pod = cluster.get("pod", "on-card", "-n", namespace)
        conditions = {c["type"]: c for c in pod["status"].get("conditions") or []}
        scheduled = conditions.get("PodScheduled")
        if scheduled and scheduled.get("reason") == "Unschedulable":
            assert not pod["spec"].get("nodeName"), pod
            return
        time.sleep(0.5)
    raise AssertionError(f"kube-scheduler never judged the pod: {pod['status']}")


def _scheduled(cluster: Cluster, namespace: str) -> bool:
    pod = cluster.get("pod", "on-card", "-n", namespace)
    return bool(pod["spec"].get("nodeName"))


@pytest.mark.e2e_on(versions=("1.37",))
def test_cordoned_cards_are_tainted_for_the_real_scheduler_and_back(
    cluster: Cluster, cordoner: DeviceCordons, namespace: str, device_class: str
) -> None:
    plan = run(cordoner.sync([CARD_0, CARD_2, "GPU-not-on-this-node"], _slices(cordoner)))
    assert plan is not None and len(plan.create) == 2 and plan.unknown == ["GPU-not-on-this-node"]
    found = {r["spec"]["deviceSelector"]["device"]: r for r in rules(cluster)}
    assert set(found) == {"hami-gpu-0", "hami-gpu-2"}, found
    taint = dict(found["hami-gpu-0"]["spec"]["taint"])
    assert taint.pop("timeAdded")  # the server's
    assert taint == {"key": CORDON, "value": "true", "effect": "NoSchedule"}
    assert found["hami-gpu-0"]["metadata"]["annotations"][CORDON] == CARD_0
    again = run(cordoner.sync([CARD_0, CARD_2], _slices(cordoner)))
    assert again is not None and not (again.create or again.replace or again.delete)

    # kube-scheduler allocates no claim the cordoned card while the rule is there.
    cluster.apply({"apiVersion": "v1", "kind": "List", "items": _claimed_pod(namespace, CARD_0)},
                  namespace=namespace)  # fmt: skip
    _unschedulable_for_the_taint(cluster, namespace)
    fewer = run(cordoner.sync([CARD_2], _slices(cordoner)))
    assert fewer is not None and fewer.delete and not fewer.create
    deadline = time.monotonic() + 60
    while not _scheduled(cluster, namespace) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _scheduled(cluster, namespace), "the card's claim was never allocated once uncordoned"

    assert run(cordoner.drop()) == 1 and rules(cluster) == []


@pytest.mark.e2e_on(versions=("1.36",))
def test_a_move_with_cordoned_cards_stops_before_anything_where_no_rule_is_served(
    cluster: Cluster, cordoner: DeviceCordons
) -> None:
    assert run(cordoner.served_version()) is None
    node = {"metadata": {"name": cluster.node.name, "annotations": {CORDON: CARD_0}}}
    with pytest.raises(MoveError) as stopped:
        run(MoveCordons(cordoner, "dra").carriable(node))
    assert "serves no DeviceTaintRule" in str(stopped.value) and not stopped.value.resumable
    # No cordon: nothing to carry, the move may go on.
    run(MoveCordons(cordoner, "dra").carriable({"metadata": {"name": cluster.node.name}}))


PLUGIN_CONFIG = {
    "nodeconfig": [
        {
            "name": "gpu-node-1",
            "operatingmode": "mig",
            "deviceMemoryScaling": 2,  # Go's encoding/json matches keys in any case
            "devicesplitcount": 4,
            "filterdevices": {"uuid": [CARD_1], "index": []},
        },
        {"name": "another-node", "operatingmode": "hami-core"},
    ]
}


def _legacy_device_plugin(namespace: str) -> list[dict[str, Any]]:
    """HAMi's device plugin DaemonSet as its chart renders it, as far as `check` reads it: its
    per-node config mounted at /config. Its pods never run (no kubelet here)."""
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "hami-device-plugin"},
        "data": {"config.json": json.dumps(PLUGIN_CONFIG)},
    }
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "hami-device-plugin"},
        "spec": {
            "selector": {"matchLabels": {"app": "hami-device-plugin"}},
            "template": {
                "metadata": {"labels": {"app": "hami-device-plugin"}},
                "spec": {
                    "nodeSelector": {"hami.io/nowhere": "true"},
                    "containers": [
                        {
                            "name": "device-plugin",
                            "image": "projecthami/hami:v2.10.0",
                            "volumeMounts": [{"name": "deviceconfig", "mountPath": "/config"}],
                        }
                    ],
                    "volumes": [
                        {"name": "deviceconfig", "configMap": {"name": "hami-device-plugin"}}
                    ],
                },
            },
        },
    }
    return [config, daemonset]


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), stdin=io.StringIO(""), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_check_and_scan_name_each_nodes_losses(cluster: Cluster, namespace: str) -> None:
    cluster.apply({"apiVersion": "v1", "kind": "List", "items": _legacy_device_plugin(namespace)},
                  namespace=namespace)  # fmt: skip
    cluster.kubectl("annotate", "node", cluster.node.name, f"{CORDON}={CARD_0}", "--overwrite")
    try:
        kubeconfig = str(cluster.plane.admin_kubeconfig)
        _, out, err = _cli("check", "--kubeconfig", kubeconfig, "-o", "json")
        lines = {line["check"]: line for line in json.loads(out)["checks"]}
        line = lines["legacy node settings"]
        assert line["level"] == "WARN", (line, err)
        detail = line["detail"]
        assert "1 node(s) lose what legacy HAMi did there: gpu-node-1: operating mode mig" in detail
        assert "deviceMemoryScaling 2 (the cluster's is 1)" in detail
        assert "deviceSplitCount 4: DRA has no cap on tasks per card" in detail
        assert f"cards hidden from HAMi (uuid {CARD_1})" in detail
        served = cluster.version >= "1.37"
        assert ("migrate node --to dra carries them" in detail) == served, detail
        assert ("serves no DeviceTaintRule" in detail) == (not served), detail

        _, out, err = _cli("scan", "--cluster", "--kubeconfig", kubeconfig, "-A", "-o", "json")
        notes = json.loads(out)["notes"]
        (node,) = [n for n in notes if n.startswith("node gpu-node-1: ")]
        assert node.removeprefix("node ") in detail, (node, detail)
    finally:
        cluster.kubectl("annotate", "node", cluster.node.name, f"{CORDON}-")
        cluster.kubectl("delete", "daemonset,configmap", "hami-device-plugin", "-n", namespace)
