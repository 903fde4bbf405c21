"""The canary of a move to the DRA pool (cluster/moves/canary.py): its script under a real
shell, its objects as the webhook's translation makes them, and a run against the real
control plane (the shared 1.36 one: kube-scheduler allocates the canary's claim on the stand-in
GPU node's devices). No kubelet runs there, so the test plays the kubelet's part where one is
needed: it writes the driver pod's and the canary pod's status (Running, Ready or Failed). The
canary on a real kubelet with the driver stand-in's CDI environment is
tests/node/test_staged_moves.py (the two-node wave)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from hami_dra_webhook.cluster.moves.canary import (
    EXPECTED_ENV,
    PASSED,
    SCRIPT,
    Canary,
    _termination,
    _waiting,
    canary_objects,
    driver_words,
)
from hami_dra_webhook.cluster.moves.chart_driver import ChartDriver, driver_name
from hami_dra_webhook.core.migration.move_state import MoveError
from hami_dra_webhook.core.model.pod_view import PodView
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from tests.support.chart_driver import driver_binding, driver_daemonset
from tests.support.cluster import Cluster, wait_for
from tests.support.loop import run

MERGE = {"Content-Type": "application/merge-patch+json"}


def _script_in(folder: Path) -> str:
    """SCRIPT with its two host paths moved into `folder` (the termination log is /dev's on a
    node) and `sleep` a stub that returns at once: the logic is run as it ships."""
    return SCRIPT.replace(PASSED, str(folder / "passed")).replace(
        "/dev/termination-log", str(folder / "termination-log")
    )


@pytest.mark.parametrize(
    ("env", "passes"),
    [
        (EXPECTED_ENV, True),
        ({}, False),
        ({**EXPECTED_ENV, "CUDA_DEVICE_MEMORY_LIMIT_0": "1024m"}, False),
        ({**EXPECTED_ENV, "CUDA_DEVICE_SM_LIMIT_0": "100"}, False),
    ],
)
def test_the_canary_passes_only_on_the_environment_its_request_means(
    tmp_path: Path, env: dict[str, str], passes: bool
) -> None:
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "sleep").write_text("#!/bin/sh\nexit 0\n")
    (stubs / "sleep").chmod(0o755)
    environment = {"PATH": f"{stubs}:{os.environ['PATH']}", **env}
    result = subprocess.run(
        ["sh", "-c", _script_in(tmp_path)], env=environment, check=False, timeout=10
    )
    assert (result.returncode == 0) is passes
    assert (tmp_path / "passed").exists() is passes
    if not passes:
        said = (tmp_path / "termination-log").read_text()
        for name in EXPECTED_ENV:
            assert f"{name}={env.get(name, 'unset')}" in said, said


def test_the_canary_is_the_webhooks_conversion_pinned_to_the_cordoned_node() -> None:
    claim, pod = canary_objects(DEFAULT_POLICY, "gpu-7", "hami-driver", "r/driver@sha256:ab")
    requests = claim["spec"]["devices"]["requests"]
    assert [r["exactly"]["capacity"]["requests"] for r in requests] == [
        {"memory": "1000Mi", "cores": "10"}
    ]
    spec = pod["spec"]
    (entry,) = spec["resourceClaims"]
    assert entry == {"name": entry["name"], "resourceClaimName": claim["metadata"]["name"]}
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-7"]}]}
    ]
    assert spec["tolerations"] == [{"operator": "Exists"}]  # the node is cordoned
    (container,) = spec["containers"]
    assert container["image"] == "r/driver@sha256:ab"
    assert container["resources"] == {"claims": [{"name": entry["name"]}]}
    assert spec["restartPolicy"] == "Never"


def test_the_driver_must_have_a_ready_pod_on_the_node() -> None:
    said = driver_words(None, "gpu-7", "hami")
    assert "no driver pod (of the chart's DaemonSet hami-driver, release hami) on gpu-7" in said
    pending = {"metadata": {"namespace": "d", "name": "p"}, "status": {"phase": "Pending"}}
    assert driver_words(pending, "gpu-7", "hami") == "the driver pod d/p is not Ready (Pending)"
    ready = {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    assert driver_words(ready, "gpu-7", "hami") == ""


def test_the_canarys_words_for_a_pod_that_failed_or_waits() -> None:
    """What `migrate node` says of a canary that did not run: its termination log, else why it
    waits (not scheduled, then a container's waiting reason); entries of other shapes pass."""
    said = {"state": {"terminated": {"message": " GPU=unset \n", "reason": "Error"}}}
    failed = PodView.of({"status": {"phase": "Failed", "containerStatuses": [{"state": {}}, said]}})
    assert _termination(failed) == "GPU=unset"
    reason = {"state": {"terminated": {"reason": "OOMKilled"}}}
    assert (
        _termination(PodView.of({"status": {"containerStatuses": [reason, said]}})) == "OOMKilled"
    )
    assert _termination(PodView.of({"status": {"containerStatuses": ["x"]}})) == ""
    unscheduled = {"type": "PodScheduled", "status": "False", "message": "0/1 nodes"}
    waiting = {"state": {"waiting": {"reason": "ContainerCreating"}}}
    status = {"conditions": [unscheduled], "containerStatuses": [waiting]}
    assert _waiting(PodView.of({"status": status})) == "not scheduled: 0/1 nodes"
    status = {"conditions": [{**unscheduled, "status": "True"}], "containerStatuses": [waiting]}
    assert _waiting(PodView.of({"status": status})) == "ContainerCreating"
    assert _waiting(PodView.of({"status": {"conditions": [None]}})) == "no container status yet"


def test_only_the_charts_driver_is_the_driver() -> None:
    """Issue 61: a pod is the driver's by its namespace, ServiceAccount and owner DaemonSet,
    which the chart's ClusterRoleBinding names; never by a label."""
    driver = ChartDriver("hami-system", "hami-driver", "hami-driver")
    owner: dict[str, Any] = {"kind": "DaemonSet", "name": "hami-driver", "controller": True}
    metadata: dict[str, Any] = {"namespace": "hami-system", "ownerReferences": [owner]}
    spec = {"serviceAccountName": "hami-driver"}
    assert driver.runs({"metadata": metadata, "spec": spec})
    for key, value in (
        ("namespace", "tenant"),
        ("ownerReferences", []),
        ("ownerReferences", [{**owner, "controller": False}]),
    ):
        assert not driver.runs({"metadata": {**metadata, key: value}, "spec": spec}), key
    assert not driver.runs({"metadata": metadata, "spec": {"serviceAccountName": "default"}})
    assert driver_name("x" * 70) == "x" * 63


def _status(kube: Cluster, namespace: str, name: str, status: dict[str, Any]) -> None:
    path = f"/api/v1/namespaces/{namespace}/pods/{name}/status"
    code, body = kube.plane.request("PATCH", path, {"status": status}, **MERGE)
    assert code == 200, body


def _running(ready: bool) -> dict[str, Any]:
    condition = {"type": "Ready", "status": "True" if ready else "False"}
    return {"phase": "Running", "conditions": [condition]}


def _bound_canary(kube: Cluster, namespace: str) -> str:
    def scheduled() -> str | None:
        pods = kube.pods(namespace, "hami.io/gpu-pool-canary")
        found = [p for p in pods if p["spec"].get("nodeName") == kube.node.name]
        return found[0]["metadata"]["name"] if found else None

    return wait_for(scheduled, "the canary pod scheduled on the GPU node")


DRIVER = DEFAULT_POLICY.webhook.driver_name


@pytest.mark.plane
def test_a_canary_runs_on_the_node_and_is_removed(kube: Cluster, real_api: Any) -> None:
    if kube.kubectl("get", "deviceclass", DRIVER, check=False).returncode != 0:
        device_class = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": DRIVER},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        }
        kube.apply(device_class, namespace="default")  # the chart's, shared by the cluster's tests
    namespace = kube.create_namespace("canary")
    tenant = kube.create_namespace("tenant")
    try:
        _canary_runs(kube, real_api, namespace, tenant)
    finally:  # its driver pod would be every later `check`'s (no kubelet ends it: at once)
        kube.kubectl("delete", "clusterrolebinding", driver_name(RELEASE), "--ignore-not-found")
        kube.kubectl("delete", "daemonset", "--all", "-n", namespace, "--wait=false")
        for where in (namespace, tenant):
            kube.kubectl("delete", "pods", "--all", "-n", where, "--grace-period=0", "--force")
            kube.kubectl("delete", "namespace", where, "--wait=false")


RELEASE = "canary-test"  # the chart's driver objects are named after its release


def _chart_driver(kube: Cluster, namespace: str) -> str:
    """What the chart installs for its driver (driver.yaml): its ServiceAccount, the
    ClusterRoleBinding that names it, and its DaemonSet, here on the GPU node only; the
    DaemonSet's pod once kube-scheduler has bound it (the test then plays its kubelet)."""
    name = driver_name(RELEASE)
    kube.kubectl("create", "serviceaccount", name, "-n", namespace)
    kube.apply(driver_binding(name, namespace), namespace=namespace)
    kube.apply(driver_daemonset(name, kube.node.name, "localhost/driver:v1"), namespace=namespace)

    def bound() -> str | None:
        pods = kube.pods(namespace, "app.kubernetes.io/component=dra-driver")
        found = [p for p in pods if p["spec"].get("nodeName") == kube.node.name]
        return found[0]["metadata"]["name"] if found else None

    return wait_for(bound, "the driver DaemonSet's pod bound to the GPU node")


def _lookalike(kube: Cluster, namespace: str) -> None:
    """A tenant's pod labelled as the driver, on the node, Ready (issue 61, finding 2)."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "driver", "labels": {"app.kubernetes.io/component": "dra-driver"}},
        "spec": {
            "nodeName": kube.node.name,
            "containers": [{"name": "plugin", "image": "tenant/own:image"}],
        },
    }
    kube.apply(pod, namespace=namespace)
    _status(kube, namespace, "driver", _running(True))


def _canary_runs(kube: Cluster, real_api: Any, namespace: str, tenant: str) -> None:
    node = kube.node.name

    async def attempt(kubelet: dict[str, Any] | None) -> str:
        deadline = time.monotonic() + 60
        canary = Canary(real_api, DEFAULT_POLICY, node, deadline, 0.2, RELEASE)
        task = asyncio.ensure_future(canary.run())
        if kubelet is not None:  # the kubelet's part, once the scheduler has bound the pod
            name = await asyncio.to_thread(_bound_canary, kube, namespace)
            await asyncio.to_thread(_status, kube, namespace, name, kubelet)
        return await task

    _lookalike(kube, tenant)
    with pytest.raises(MoveError, match=f"no driver pod .* on {node}"):
        run(attempt(None))
    assert not kube.pods(tenant, "hami.io/gpu-pool-canary")  # nothing ran in the tenant's
    driver = _chart_driver(kube, namespace)
    _status(kube, namespace, driver, _running(False))
    with pytest.raises(MoveError, match=f"the driver pod {namespace}/{driver} is not Ready"):
        run(attempt(None))
    _status(kube, namespace, driver, _running(True))

    said = run(attempt(_running(True)))
    assert said.startswith(f"a converted pod ran on {node}: its claim allocated there"), said
    # Gone: no kubelet confirms the pod's end, the grace period is 0; the claim follows.
    wait_for(lambda: not kube.pods(namespace, "hami.io/gpu-pool-canary") or None, "canary gone")
    wait_for(
        lambda: not kube.get("resourceclaims", "-n", namespace)["items"] or None,
        "the canary's claim gone",
    )

    failed = {
        "phase": "Failed",
        "containerStatuses": [
            {
                "name": "canary",
                "ready": False,
                "restartCount": 0,
                "image": "localhost/driver:v1",
                "imageID": "",
                "state": {
                    "terminated": {
                        "exitCode": 1,
                        "message": "CUDA_DEVICE_MEMORY_LIMIT_0=unset CUDA_DEVICE_SM_LIMIT_0=unset",
                    }
                },
            }
        ],
    }
    with pytest.raises(MoveError, match=r"failed on .*: CUDA_DEVICE_MEMORY_LIMIT_0=unset"):
        run(attempt(failed))
    wait_for(lambda: not kube.pods(namespace, "hami.io/gpu-pool-canary") or None, "canary gone")
