"""Volcano Jobs on the real node (Kubernetes 1.37), with Volcano's own scheduler and
controllers: the Job is converted at its admission, Volcano's controller makes its PodGroup and
pods from the converted templates, Volcano's scheduler allocates their claims on the node's
driver, and the pods run.

Volcano v1.14.1's `scheduler` and `controller-manager` are built from its Go module
(tests/node/go/volcano; tests/node/build.py) and run as processes beside the control plane,
with the admin kubeconfig and Volcano's own scheduler configuration, DRA enabled in its
predicates plugin (and DRAConsumableCapacity, which the driver's shares need, enabled in the
scheduler's feature gates). Its CRDs come from the same module in Go's module cache (never
copied here). Volcano's admission webhook is not run: the Job below names what it would default
(queue, schedulerName, minAvailable). The chart's volcano.convertJobs is `auto`: it is on
because Volcano's scheduler ConfigMap enables DRA, read at `helm upgrade`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.controlplane.cluster import Process, free_port
from tests.node.build import volcano_module
from tests.node.conftest import NAMESPACE, RELEASE, NodeCluster, chart_sets
from tests.node.images import TEST_IMAGE
from tests.support.chart_tools import CHART
from tests.support.cluster import wait_for

pytestmark = pytest.mark.node  # the real node: runs beside the quiet tests

NODE_VERSIONS = ("1.37",)

CRDS = "installer/helm/chart/volcano/crd/bases"
SCHEDULER_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
    arguments:
      predicate.DynamicResourceAllocationEnable: true
  - name: proportion
  - name: nodeorder
  - name: binpack
"""


def _job(name: str) -> dict[str, Any]:
    share = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 4000, "nvidia.com/gpucores": 30}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": "volcano",
            "queue": "default",
            "minAvailable": 2,
            "tasks": [
                {
                    "name": "worker",
                    "replicas": 2,
                    "minAvailable": 2,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "train",
                                    "image": TEST_IMAGE,
                                    "command": ["sh", "-c", "sleep 3600"],
                                    "resources": {"requests": share, "limits": share},
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }


@pytest.fixture(scope="module")
def volcano(chart: NodeCluster) -> Iterator[NodeCluster]:
    """Volcano's CRDs, scheduler ConfigMap, default Queue, scheduler and controllers; the chart
    upgraded so that `auto` reads the ConfigMap. Afterwards the chart is as it was."""
    binaries = chart.real.binaries if chart.real is not None else None
    assert binaries is not None
    for crd in sorted((volcano_module() / CRDS).glob("*.yaml")):
        chart.kubectl("apply", "--server-side", "-f", str(crd))
    chart.ensure_namespace("volcano-system")
    chart.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "volcano-scheduler-configmap"},
            "data": {"volcano-scheduler.conf": SCHEDULER_CONF},
        },
        namespace="volcano-system",
    )
    conf = chart.folder / "volcano-scheduler.conf"
    conf.write_text(SCHEDULER_CONF)
    kubeconfig = str(chart.plane.admin_kubeconfig)
    processes: list[Process] = []
    try:
        processes.append(
            chart.plane.spawn(
                "vc-controller-manager",
                [
                    str(binaries.volcano / "controller-manager"),
                    f"--kubeconfig={kubeconfig}",
                    "--leader-elect=false",
                    f"--listen-address=127.0.0.1:{free_port()}",
                    f"--healthz-address=127.0.0.1:{free_port()}",
                    "--controllers=job-controller,pg-controller,queue-controller,gc-controller",
                ],
            )
        )
        processes.append(
            chart.plane.spawn(
                "vc-scheduler",
                [
                    str(binaries.volcano / "scheduler"),
                    f"--kubeconfig={kubeconfig}",
                    f"--scheduler-conf={conf}",
                    "--leader-elect=false",
                    "--feature-gates=DRAConsumableCapacity=true",
                    f"--listen-address=127.0.0.1:{free_port()}",
                    f"--healthz-address=127.0.0.1:{free_port()}",
                    "--schedule-period=500ms",
                ],
            )
        )
        # Volcano's queue controller makes the default Queue; made here if it has not yet.
        queue = (
            "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\n"
            "metadata: {name: default}\nspec: {weight: 1, reclaimable: true}\n"
        )
        chart.kubectl("create", "-f", "-", stdin=queue, check=False)
        wait_for(
            lambda: (
                chart.kubectl(
                    "get", "queues.scheduling.volcano.sh", "default", check=False
                ).returncode
                == 0
                or None
            ),
            "Volcano's default Queue",
        )
        _upgrade(chart)
        yield chart
    finally:
        for process in processes:
            process.stop()
        chart.kubectl("delete", "configmap", "volcano-scheduler-configmap", "-n", "volcano-system")
        chart.kubectl("delete", "namespace", "volcano-system", "--wait=false")
        _upgrade(chart, expect_volcano=False)


def _upgrade(chart: NodeCluster, expect_volcano: bool = True) -> None:
    """helm upgrade with the values helm_install gave: `auto` reads Volcano's ConfigMap now."""
    command = ["upgrade", RELEASE, str(CHART), "-n", NAMESPACE]
    command += ["-f", str(chart.folder / "node-values.yaml")]
    for item in chart_sets():
        command += ["--set", item]
    chart.helm(*command)
    chart.wait_chart_ready()

    def only_new_pods() -> bool | None:
        # The rollout is over before the old pods leave the Service: until then they answer
        # as they were configured (a Job admitted unchanged).
        pods = chart.get("pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/component=webhook")[
            "items"
        ]
        converting = ["--volcano-jobs=convert" in p["spec"]["containers"][0]["args"] for p in pods]
        return (bool(pods) and all(c == expect_volcano for c in converting)) or None

    wait_for(only_new_pods, "only the upgraded webhook pods", timeout=120)
    configuration = chart.get("mutatingwebhookconfiguration", RELEASE)
    names = [w["name"] for w in configuration["webhooks"]]
    assert (f"volcano-jobs.{RELEASE}.project-hami.io" in names) == expect_volcano, names


def test_a_volcano_job_runs_converted_under_volcanos_scheduler(
    volcano: NodeCluster, namespace: str
) -> None:
    volcano.apply(_job("train"), namespace=namespace)
    stored = volcano.get("jobs.batch.volcano.sh", "train", "-n", namespace)
    template = stored["spec"]["tasks"][0]["template"]
    assert template["spec"]["resourceClaims"], template
    container = template["spec"]["containers"][0]
    assert not [k for k in container["resources"].get("limits", {}) if k.startswith("nvidia")]

    def group() -> dict[str, Any] | None:
        groups = volcano.get("podgroups.scheduling.volcano.sh", "-n", namespace)["items"]
        return groups[0] if groups else None

    podgroup = wait_for(group, "Volcano's PodGroup of the Job")
    minimum = podgroup["spec"].get("minResources", {})
    assert not [k for k in minimum if "nvidia.com" in k], minimum

    def running() -> list[dict[str, Any]] | None:
        pods = volcano.get("pods", "-n", namespace)["items"]
        ready = [p for p in pods if p["status"].get("phase") == "Running"]
        return ready if len(ready) == 2 else None

    pods = wait_for(running, "the Job's 2 pods running", timeout=180)
    for pod in pods:
        assert pod["spec"]["schedulerName"] == "volcano"
        assert pod["spec"]["nodeName"] == volcano.node.name
    claims = volcano.get("resourceclaims", "-n", namespace)["items"]
    assert len(claims) == 2
    for claim in claims:
        [result] = claim["status"]["allocation"]["devices"]["results"]
        assert result["consumedCapacity"]["memory"] == "4000Mi", result
        assert result["consumedCapacity"]["cores"] == "30", result
