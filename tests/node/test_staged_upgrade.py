"""Leaving and upgrading on the real node (1.37), as docs/migration.md says to, with a client
creating GPU pods throughout:

- uninstall in the order that never blocks a pod creation (the MutatingWebhookConfiguration
  first, then `helm uninstall`): no create fails, and a running converted pod keeps running;
- install the previous chart and image (chart 0.1.0, built from this repository's history at
  images.PREVIOUS_COMMIT), then `helm upgrade` to this checkout's: every create is converted.

The cluster ends with this checkout's chart installed as the package fixture installed it.
Marked long (CI's second step, .ci/long): the previous image is built for it.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import yaml

from tests.node.conftest import (
    DEVICE_CONFIG,
    NAMESPACE,
    RELEASE,
    NodeCluster,
    _release,
    chart_sets,
)
from tests.node.creates import creating_pods
from tests.node.images import PREVIOUS_IMAGE, previous_image, previous_source
from tests.support.chart_tools import CHART
from tests.support.cluster import wait_for

pytestmark = pytest.mark.node  # the real node: runs beside the quiet tests

AFTER_SECONDS = 5.0  # creates go on this long after each change


def keeper() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "keeper"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "cuda",
                    "image": "docker.io/library/ubuntu:22.04",
                    "command": ["sleep", "3600"],
                    "resources": {"limits": {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 2000}},
                }
            ],
        },
    }


def running_unrestarted(cluster: NodeCluster, namespace: str) -> dict[str, Any] | None:
    pod = cluster.pod(namespace, "keeper")
    statuses = pod["status"].get("containerStatuses") or [{}]
    if pod["status"].get("phase") == "Running" and statuses[0].get("restartCount") == 0:
        return pod
    return None


def install_args(chart: str, image: tuple[str, str] | None, folder: Any) -> list[str]:
    values = folder / "node-values.yaml"
    values.write_text(yaml.safe_dump({"deviceConfig": DEVICE_CONFIG}))
    sets = list(chart_sets())
    if image is not None:
        sets = [
            s for s in sets if not s.startswith(("webhook.image.repository", "webhook.image.tag"))
        ]
        sets += [f"webhook.image.repository={image[0]}", f"webhook.image.tag={image[1]}"]
    args = [chart, "-n", NAMESPACE, "-f", str(values)]
    for item in sets:
        args += ["--set", item]
    return args


@pytest.mark.long  # about 2 minutes with the previous image's build: CI's second step
def test_uninstall_then_upgrade_from_the_previous_chart(chart: NodeCluster) -> None:
    namespace = chart.create_namespace("staged-upgrade")
    numbers: dict[str, Any] = {}
    try:
        chart.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(keeper()))
        pod = wait_for(lambda: running_unrestarted(chart, namespace), "the keeper running", 120)
        assert pod["spec"]["resourceClaims"], "the keeper is converted"

        # Leaving: the configuration first, then the release.
        with creating_pods(chart, namespace, max_seconds=300, converted_only=False) as creates:
            time.sleep(AFTER_SECONDS)
            creates.phase = "uninstall"
            # docs/install.md's command: by the release's label, whatever the names and
            # whether the workloads' preview is on
            chart.kubectl(
                "delete",
                "mutatingwebhookconfiguration,validatingwebhookconfiguration",
                "-l",
                f"app.kubernetes.io/instance={RELEASE}",
            )
            chart.helm("uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout", "180s")
            time.sleep(AFTER_SECONDS)
        numbers["uninstall"] = creates.numbers()
        assert running_unrestarted(chart, namespace), "the converted pod keeps running"

        # The previous chart and image, then the upgrade to this checkout's.
        assert chart.real is not None
        chart.real.import_images(previous_image(chart.folder / "previous"))
        previous = previous_source(chart.folder / "previous")
        repository, tag = PREVIOUS_IMAGE.removeprefix("localhost/").split(":")
        old = install_args(
            str(previous / "charts/hami-dra-webhook"), (repository, tag), chart.folder
        )
        chart.helm("install", RELEASE, *old)
        # Chart 0.1.0 knows no pools: its driver runs on every GPU node, the legacy one too.
        chart.wait_chart_ready(drivers=2)
        with creating_pods(chart, namespace, max_seconds=400) as creates:
            time.sleep(AFTER_SECONDS)
            creates.phase = "upgrade"
            chart.helm("upgrade", RELEASE, *install_args(str(CHART), None, chart.folder))
            chart.wait_chart_ready()
            time.sleep(AFTER_SECONDS)
        numbers["upgrade"] = creates.numbers()
        revision = json.loads(chart.helm("history", RELEASE, "-n", NAMESPACE, "-o", "json").stdout)
        assert [r["chart"] for r in revision] == [
            "hami-dra-webhook-0.1.0",
            "hami-dra-webhook-0.2.0",
        ]
        assert running_unrestarted(chart, namespace), "the converted pod keeps running"
    finally:
        (chart.folder / "staged-upgrade.json").write_text(json.dumps(numbers, indent=1))
        print("upgrade and uninstall:", json.dumps(numbers))
        _release(chart, namespace)
    assert numbers["uninstall"]["failed"] == 0, numbers
    assert numbers["upgrade"]["failed"] == 0, numbers
    assert (
        numbers["uninstall"]["by_phase"]["uninstall"] > 0
        and numbers["upgrade"]["by_phase"]["upgrade"] > 0
    )
