"""The node monitor's objects in the chart: on the nodes the driver serves (its affinity with
the migration pool, its selector and tolerations), in the driver's namespace, least privilege,
the claims folder read-only unless the feedback loop writes, and a value that turns it off."""

from __future__ import annotations

from typing import Any

from tests.support.chart_tools import DRIVER, MONITOR, find, render


def _monitor(*sets: str) -> dict[str, Any]:
    return find(render(*sets), "DaemonSet", MONITOR)


def test_it_runs_where_the_driver_runs_in_its_namespace() -> None:
    sets = (
        "driver.namespace=gpu-system",
        "driver.nodeSelector.pool=gpu",
        "driver.tolerations[0].operator=Exists",
    )
    documents = render(*sets)
    driver = find(documents, "DaemonSet", DRIVER)["spec"]["template"]["spec"]
    monitor = find(documents, "DaemonSet", MONITOR)
    spec = monitor["spec"]["template"]["spec"]
    assert monitor["metadata"]["namespace"] == "gpu-system"
    for key in ("affinity", "nodeSelector", "tolerations"):
        assert spec[key] == driver[key], key
    staged_pod = _monitor("migration.scope=namespaces")["spec"]["template"]["spec"]
    staged = staged_pod["affinity"]["nodeAffinity"]
    terms = staged["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    pool = {"key": "hami.io/gpu-pool", "operator": "In", "values": ["dra"]}
    assert all(pool in term["matchExpressions"] for term in terms)  # the DRA pool only


def test_least_privilege_and_the_folder_read_only_without_feedback() -> None:
    documents = render()
    spec = find(documents, "DaemonSet", MONITOR)["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert spec["hostPID"] is True and "hostNetwork" not in spec
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["args"][:2] == ["monitor", "--claims-root=/usr/local/vgpu/claims"]
    assert "--feedback" in container["args"]
    assert container["volumeMounts"][0]["readOnly"] is False  # the feedback loop writes
    assert spec["volumes"][0]["hostPath"]["path"] == "/usr/local/vgpu/claims"
    rules = find(documents, "ClusterRole", MONITOR)["rules"]
    assert {(r["resources"][0], tuple(r["verbs"])) for r in rules} == {
        ("pods", ("list", "watch")),
        ("resourceclaims", ("get",)),
        ("resourceslices", ("list", "watch")),
    }
    quiet = _monitor("monitor.feedback=false", "monitor.legacyMetrics=true")
    args = quiet["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--no-feedback" in args and "--legacy-metrics" in args
    mount = quiet["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]
    assert mount["readOnly"] is True


def test_off_and_scraped() -> None:
    assert not [d for d in render("monitor.enabled=false") if MONITOR in d["metadata"]["name"]]
    scraped = find(render("serviceMonitor.enabled=true"), "ServiceMonitor", MONITOR)
    assert scraped["spec"]["endpoints"][0]["port"] == "metrics"
    service = find(render(), "Service", MONITOR)
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["ports"][0]["port"] == 9394
