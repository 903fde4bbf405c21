"""Volcano Jobs converted at their own admission, through the real kube-apiserver: Volcano's
Job CRD (from its Go module, volcano.sh/volcano, pinned by tests/node/go/volcano) installed,
a release with volcano.convertJobs, and `kubectl apply` of a Job whose task asks for legacy
resources. What kube-apiserver stores is checked: the task template with a claim, the
ResourceClaimTemplate in the Job's namespace. Volcano's scheduler and controllers run on the
real node (tests/node/test_volcano_on_node.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.node.build import volcano_module
from tests.support.cluster import CHART, Cluster, Release, wait_for

pytestmark = pytest.mark.e2e_on(capacity=True, versions=("1.37",))

CRD = "installer/helm/chart/volcano/crd/bases/batch.volcano.sh_jobs.yaml"
WEBHOOK = "volcano-jobs.hami-dra-webhook.project-hami.io"


def job(name: str, limits: dict[str, object], scheduler: str | None = None) -> dict[str, object]:
    spec: dict[str, object] = {
        "minAvailable": 1,
        "tasks": [
            {
                "name": "worker",
                "replicas": 2,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "train",
                                "image": "registry.k8s.io/pause:3.10",
                                "resources": {"limits": limits},
                            }
                        ],
                    }
                },
            }
        ],
    }
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": spec,
    }


def install_job_crd(cluster: Cluster) -> None:
    """Volcano's Job CRD, applied and established."""
    cluster.kubectl("apply", "--server-side", "-f", str(volcano_module() / CRD))

    def established() -> bool | None:
        status = cluster.get("crd", "jobs.batch.volcano.sh").get("status") or {}
        conditions = status.get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions) or None

    wait_for(established, "Volcano's Job CRD to be established")


@pytest.fixture(scope="module")
def volcano(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    """Volcano's Job CRD and a second release converting Volcano Jobs (the shared one's pod
    webhook stays as it is)."""
    install_job_crd(cluster)
    release = Release(
        cluster,
        "volcano",
        "hami-volcano",
        sets=["volcano.convertJobs=true", "deviceClass.create=false", "driver.enabled=false"],
    )
    release.install()
    try:
        release.start(Path(tmp_path_factory.mktemp("volcano-webhook")))
        yield release
    finally:
        release.uninstall()
        cluster.kubectl("delete", "namespace", "hami-volcano", "--wait=false")


def test_a_volcano_jobs_task_template_is_stored_converted(
    cluster: Cluster, volcano: Release, namespace: str
) -> None:
    cluster.apply(
        job("train", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 4000}), namespace=namespace
    )
    stored = cluster.get("jobs.batch.volcano.sh", "train", "-n", namespace)
    template = stored["spec"]["tasks"][0]["template"]
    container = template["spec"]["containers"][0]
    assert "limits" not in container["resources"], container
    assert container["resources"]["claims"] == [{"name": "train-gpu"}]
    [claim] = template["spec"]["resourceClaims"]
    assert template["metadata"]["labels"]["hami.io/dra"] == "true"
    assert "schedulerName" not in template["spec"]  # the Job's (volcano), never written here
    made = cluster.get(
        "resourceclaimtemplates", claim["resourceClaimTemplateName"], "-n", namespace
    )
    requests = made["spec"]["spec"]["devices"]["requests"]
    assert requests[0]["exactly"]["capacity"]["requests"]["memory"] == "4000Mi"


def test_a_job_of_another_scheduler_and_one_without_legacy_resources_are_left(
    cluster: Cluster, volcano: Release, namespace: str
) -> None:
    before = volcano.metric("hami_dra_admissions_total")
    cluster.apply(job("plain", {"cpu": "1"}), namespace=namespace)
    cluster.apply(
        job("other", {"nvidia.com/gpu": 1}, scheduler="kai-scheduler"), namespace=namespace
    )
    other = cluster.get("jobs.batch.volcano.sh", "other", "-n", namespace)
    assert other["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"] == {
        "limits": {"nvidia.com/gpu": 1}
    }
    # The plain Job never reached the webhook (matchConditions); the other one did, unchanged.
    assert volcano.metric("hami_dra_admissions_total") == before + 1


def test_a_refused_task_refuses_the_job(cluster: Cluster, volcano: Release, namespace: str) -> None:
    manifest = job("bad", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": "16Gi"})
    result = cluster.kubectl(
        "apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(manifest), check=False
    )
    assert result.returncode != 0
    assert f'admission webhook "{WEBHOOK}" denied the request' in result.stderr
    assert "task 'worker'" in result.stderr and "nvidia.com/gpumem" in result.stderr


SCHEDULER_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: predicates
    arguments:
      predicate.DynamicResourceAllocationEnable: DRA
  - name: proportion
"""


def _volcano_entry(cluster: Cluster) -> list[str]:
    """The webhooks of a server-side dry-run install (lookup reads the live cluster)."""
    rendered = cluster.helm(
        "install", "probe", str(CHART), "-n", "hami-probe", "--dry-run=server",
        "--set", "admission.url=https://127.0.0.1:1/mutate",
        "--set", "deviceClass.create=false",  # the shared release owns it
    ).stdout  # fmt: skip
    manifest = rendered.split("MANIFEST:", 1)[-1].split("NOTES:", 1)[0]
    documents = [d for d in yaml.safe_load_all(manifest) if d]
    [configuration] = [d for d in documents if d["kind"] == "MutatingWebhookConfiguration"]
    return [w["name"] for w in configuration["webhooks"] if w["name"].startswith("volcano-jobs.")]


def test_auto_converts_where_volcanos_scheduler_enables_dra(cluster: Cluster) -> None:
    """volcano.convertJobs auto reads Volcano's scheduler ConfigMap at install."""
    assert _volcano_entry(cluster) == []  # no Volcano scheduler ConfigMap
    cluster.kubectl("create", "namespace", "volcano-system")
    try:
        for enabled, expected in (("false", []), ("true", [WEBHOOK])):
            cluster.apply(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "volcano-scheduler-configmap"},
                    "data": {"volcano-scheduler.conf": SCHEDULER_CONF.replace("DRA", enabled)},
                },
                namespace="volcano-system",
            )
            assert _volcano_entry(cluster) == expected, enabled
    finally:
        cluster.kubectl("delete", "namespace", "volcano-system", "--wait=false")
