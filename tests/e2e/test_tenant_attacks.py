"""Issue 34, finding 1, end to end: the chart installed, the webhook process under the chart's
ServiceAccount, a tenant with `edit` in its own namespace creating a 790 KB template under the
webhook's labels (4.7 MB as kube-apiserver serves it) and one with 250 KB of annotations, and
touching both once a second. Before, every watch event of the first killed the template watch
and /readyz failed in 96% of samples. Now /readyz never fails, and GPU pods of another namespace
are converted throughout."""

from __future__ import annotations

import threading
import time

import pytest

from tests.support.cluster import Cluster, Release
from tests.support.pods import gpu_pod
from tests.support.tenants import create_as, squatting_template, tenant_kubeconfig, touch_as

pytestmark = pytest.mark.e2e_on(versions=("1.37",))


# The default run plays 12 s of it; the long step the 150 s.
@pytest.mark.parametrize("seconds", [12.0, pytest.param(150.0, marks=pytest.mark.long)])
def test_a_tenants_templates_never_take_readiness_or_other_tenants_pods(
    cluster: Cluster, hami: Release, namespace: str, seconds: float
) -> None:
    assert hami.webhook is not None
    webhook = hami.webhook
    webhook.wait_ready(timeout=60)
    tenant_namespace = cluster.create_namespace("tenant")
    tenant = tenant_kubeconfig(cluster, tenant_namespace)
    create_as(
        cluster,
        tenant,
        tenant_namespace,
        squatting_template("hami-gpu-attack-spec", spec_bytes=790_000),
    )  # the same names in both sizes: each size runs in a namespace of its own
    create_as(
        cluster,
        tenant,
        tenant_namespace,
        squatting_template("hami-gpu-attack-meta", annotation_bytes=250_000),
    )
    samples: list[int] = []
    stop = threading.Event()

    def probe() -> None:
        while not stop.is_set():
            try:
                samples.append(webhook.get_ops("/readyz")[0])
            except OSError:
                samples.append(0)
            time.sleep(0.1)

    prober = threading.Thread(target=probe)
    prober.start()
    created, started, touches = 0, time.monotonic(), 0
    try:
        while time.monotonic() - started < seconds:
            for name in ("hami-gpu-attack-spec", "hami-gpu-attack-meta"):
                touch_as(cluster, tenant, tenant_namespace, name, str(touches))
            touches += 1
            pod = gpu_pod(f"other-{created}", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000})
            cluster.apply(pod, namespace=namespace)  # fails the test when refused
            stored = cluster.pod(namespace, f"other-{created}")
            assert stored["spec"].get("resourceClaims"), "not converted"
            created += 1
            time.sleep(max(0.0, 1.0 - (time.monotonic() - started) % 1.0))
    finally:
        stop.set()
        prober.join()
    failed = [status for status in samples if status != 200]
    print(
        f"/readyz: {len(samples)} samples over {seconds:g} s, {len(failed)} failed;"
        f" {touches} touches of each template; {created} GPU pods converted elsewhere"
    )
    assert samples and not failed, f"{len(failed)} of {len(samples)} readiness samples failed"
    assert hami.metric("hami_dra_template_watch_oversized_events_total") >= touches
    assert hami.metric("hami_dra_template_watch_up") == 1
