"""A ResourceQuota that counted legacy GPUs, converted by `convert` (the real-world corpus's
dynamia-ai/workshop `resource-quota.yaml`): kube-apiserver accepts the DRA form it adds, and
that form, not the legacy keys, limits converted pods (their claims count devices)."""

from __future__ import annotations

import io
import time

import pytest
import yaml

from hami_dra_webhook.cli.main import main
from tests.support.cluster import Cluster, Release, wait_for
from tests.support.pods import gpu_pod
from tests.support.shared import shared_path

pytestmark = pytest.mark.e2e_on(capacity=True)
DEVICES = "hami-core-gpu.project-hami.io.deviceclass.resource.k8s.io/devices"


def _converted_quota() -> dict[str, object]:
    source = shared_path(
        "realworld", "cases", "dynamia-ai__workshop__sources__resource-quota.yaml",
        what="the real-world corpus",
    )  # fmt: skip
    out, err = io.StringIO(), io.StringIO()
    code = main(["convert", "-"], stdin=io.StringIO(source.read_text()), stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    quota: dict[str, object] = yaml.safe_load(out.getvalue())
    return quota


def test_the_dra_form_of_a_gpu_quota_limits_converted_pods(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    quota = _converted_quota()
    quota["metadata"] = {"name": "hami-resource-quota"}  # into this test's namespace
    cluster.apply(quota, namespace=namespace)  # strict field validation: accepted as written
    # Its requests.nvidia.com/* keys are kept (docs/quotas.md): GPU pods here are held until
    # the webhook has labelled the namespace (until then the policy refuses them).
    wait_for(
        lambda: cluster.get("namespace", namespace)["metadata"]["labels"].get("hami.io/gpu-quota"),
        "the quota namespace labelled",
    )
    counted = wait_for(
        lambda: (
            cluster.get("resourcequota", "hami-resource-quota", "-n", namespace)
            .get("status", {})
            .get("used")
        ),
        "the quota controller's first count",
    )
    assert counted[DEVICES] == "0" and counted["requests.nvidia.com/gpu"] == "0"
    limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000}
    cluster.apply(gpu_pod("first", limits), namespace=namespace)
    cluster.wait_scheduled(namespace, "first")
    cluster.apply(gpu_pod("second", limits), namespace=namespace)

    def refused_claim() -> str | None:
        events = cluster.get(
            "events", "-n", namespace, "--field-selector=involvedObject.name=second"
        )
        found = [e["message"] for e in events["items"] if "exceeded quota" in e["message"]]
        return found[0] if found else None

    message = wait_for(refused_claim, "the second pod's claim refused by the quota")
    assert DEVICES in message
    used = cluster.get("resourcequota", "hami-resource-quota", "-n", namespace)["status"]["used"]
    # The legacy keys count nothing: the converted pods carry none of them.
    assert used[DEVICES] == "1" and used["requests.nvidia.com/gpu"] == "0", used
    time.sleep(1)
    assert cluster.scheduled(cluster.pod(namespace, "second")) is not True
