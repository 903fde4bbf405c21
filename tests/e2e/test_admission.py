"""Admission through the real kube-apiserver: kubectl applies legacy manifests, kube-apiserver
calls the webhook the chart registered, and what it stores is checked."""

from __future__ import annotations

import pytest
import yaml

from tests.support.cluster import Cluster, Release
from tests.support.pods import gpu_pod, plain_pod

WEBHOOK = "hami-dra-webhook.project-hami.io"


def _templates(cluster: Cluster, namespace: str) -> list[str]:
    items = cluster.get("resourceclaimtemplates", "-n", namespace)["items"]
    return sorted(item["metadata"]["name"] for item in items)


def test_a_whole_gpu_pod_is_stored_converted(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    cluster.apply(gpu_pod("whole", {"nvidia.com/gpu": 1}), namespace=namespace)
    pod = cluster.pod(namespace, "whole")
    container = pod["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in container["resources"].get("limits", {})
    assert container["resources"]["claims"] == [{"name": "cuda-gpu"}]
    [claim] = pod["spec"]["resourceClaims"]
    assert claim["name"] == "cuda-gpu"
    assert _templates(cluster, namespace) == [claim["resourceClaimTemplateName"]]
    assert pod["metadata"]["labels"]["hami.io/dra"] == "true"


def test_a_refused_pod_shows_our_message_and_nothing_is_created(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    manifest = gpu_pod("suffixed", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": "16Gi"})
    result = cluster.kubectl(
        "apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(manifest), check=False
    )
    assert result.returncode != 0
    assert f'admission webhook "{WEBHOOK}" denied the request' in result.stderr
    assert "nvidia.com/gpumem" in result.stderr and "MiB" in result.stderr
    assert cluster.pods(namespace) == []
    assert _templates(cluster, namespace) == []


def test_a_pod_without_legacy_resources_never_reaches_the_webhook(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    before = hami.metric("hami_dra_admissions_total")
    cluster.apply(plain_pod("plain"), namespace=namespace)
    cluster.apply(gpu_pod("gpu", {"nvidia.com/gpu": 1}), namespace=namespace)
    # The GPU pod after the plain one: once it is counted, the plain one would have been too.
    assert hami.metric("hami_dra_admissions_total") == before + 1
    assert "labels" not in cluster.pod(namespace, "plain")["metadata"]


def test_server_side_dry_run_creates_nothing(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    manifest = yaml.safe_dump(gpu_pod("dry", {"nvidia.com/gpu": 1}))
    shown = cluster.kubectl(
        "apply", "-n", namespace, "--dry-run=server", "-o", "yaml", "-f", "-", stdin=manifest
    ).stdout
    converted = yaml.safe_load(shown)
    assert converted["spec"]["containers"][0]["resources"]["claims"] == [{"name": "cuda-gpu"}]
    assert cluster.pods(namespace) == []
    assert _templates(cluster, namespace) == []


def test_reapplying_the_legacy_manifest_keeps_the_pod_converted(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    manifest = gpu_pod("again", {"nvidia.com/gpu": 1})
    cluster.apply(manifest, namespace=namespace)
    first = cluster.pod(namespace, "again")
    manifest["metadata"]["labels"] = {"touched": "yes"}  # a real change, so that kubectl sends it
    result = cluster.kubectl(
        "apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(manifest), check=False
    )
    assert result.returncode == 0, result.stderr
    assert "legacy GPU resources re-applied to a converted pod were dropped" in result.stderr
    second = cluster.pod(namespace, "again")
    assert second["metadata"]["labels"]["touched"] == "yes"
    assert second["spec"]["containers"] == first["spec"]["containers"]
    assert second["spec"]["resourceClaims"] == first["spec"]["resourceClaims"]


def test_overwrite_env_hides_gpus_from_pods_without_them(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    """nvidia.overwriteEnv: the chart drops its matchConditions, so kube-apiserver sends a
    CPU-only pod too, and the webhook gives it NVIDIA_VISIBLE_DEVICES=none, as legacy HAMi."""
    hami.upgrade("--set-string", "deviceConfig=nvidia:\n  overwriteEnv: true\n")
    hami.restart()
    try:
        cluster.apply(plain_pod("cpu-only"), namespace=namespace)
        [container] = cluster.pod(namespace, "cpu-only")["spec"]["containers"]
        assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"} in container["env"]
    finally:
        hami.upgrade()
        hami.restart()
    cluster.apply(plain_pod("cpu-again"), namespace=namespace)
    assert "env" not in cluster.pod(namespace, "cpu-again")["spec"]["containers"][0]


def test_a_privileged_debug_container_is_refused_in_a_gpu_pod(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    """Issue 11, finding 20: `kubectl debug --profile=sysadmin` adds a privileged ephemeral
    container (pods/ephemeralcontainers); in a GPU pod it would see every GPU on the node. The
    chart routes the subresource, its match condition sends converted pods only."""
    cluster.apply(gpu_pod("debugged", {"nvidia.com/gpu": 1}), namespace=namespace)
    cluster.apply(plain_pod("plain"), namespace=namespace)
    before = hami.metric("hami_dra_admissions_total")
    debug = ("debug", "-n", namespace, "--image=busybox", "--attach=false")
    refused = cluster.kubectl(*debug, "--profile=sysadmin", "debugged", check=False)
    assert refused.returncode != 0
    assert f'admission webhook "ephemeral.{WEBHOOK}" denied the request' in refused.stderr
    assert "ephemeral container" in refused.stderr and "privileged" in refused.stderr
    assert not cluster.pod(namespace, "debugged")["spec"].get("ephemeralContainers")
    # Without privileged it is added; in a pod without GPUs the webhook is never called.
    cluster.kubectl(*debug, "--profile=general", "debugged")
    assert len(cluster.pod(namespace, "debugged")["spec"]["ephemeralContainers"]) == 1
    cluster.kubectl(*debug, "--profile=sysadmin", "plain")
    assert hami.metric("hami_dra_admissions_total") == before + 2
    # Second hostile-callers issue, finding 6: the opt-out label on the converted pod (or on its
    # namespace) does not skip the check: the ephemeral webhook has no selector for it.
    cluster.kubectl("label", "pod", "debugged", "hami.io/webhook=ignore", "-n", namespace)
    cluster.kubectl("label", "namespace", namespace, "hami.io/webhook=ignore")
    try:
        refused = cluster.kubectl(*debug, "--profile=sysadmin", "debugged", check=False)
    finally:
        cluster.kubectl("label", "namespace", namespace, "hami.io/webhook-")
    assert refused.returncode != 0
    assert f'admission webhook "ephemeral.{WEBHOOK}" denied the request' in refused.stderr
    assert len(cluster.pod(namespace, "debugged")["spec"]["ephemeralContainers"]) == 1


@pytest.mark.e2e_on(capacity=True)  # a gpumem share: refused where capacity is dropped
def test_a_duplicate_key_kube_apiserver_keeps_is_the_one_converted(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    """Second hostile-callers issue, finding 8: a pod sent with a duplicate key in its limits
    (raw JSON, as a client may send it): kube-apiserver keeps the last value, with a warning
    (or refuses under fieldValidation=Strict), and serializes the pod it sends the webhook, so
    the webhook converts exactly the value that is stored."""
    import json

    pod = json.dumps(gpu_pod("dup", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000}))
    raw = pod.replace(
        '"nvidia.com/gpumem": 1000', '"nvidia.com/gpumem": 1000, "nvidia.com/gpumem": 3000'
    )
    assert raw != pod
    path = f"/api/v1/namespaces/{namespace}/pods"
    warned = cluster.kubectl(
        "create", "--raw", f"{path}?fieldValidation=Warn", "-f", "-", stdin=raw
    )
    stored = cluster.pod(namespace, "dup")
    [claim] = stored["spec"]["resourceClaims"]
    template = cluster.get(
        "resourceclaimtemplate", claim["resourceClaimTemplateName"], "-n", namespace
    )
    exactly = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    if cluster.consumable_capacity:
        assert exactly["capacity"]["requests"]["memory"] == "3000Mi"
    annotation = template["metadata"]["annotations"]["hami.io/legacy-request"]
    assert annotation == "nvidia.com/gpu=1,nvidia.com/gpumem=3000", warned.stderr
    strict = cluster.kubectl(
        "create",
        "--raw",
        f"{path}?fieldValidation=Strict",
        "-f",
        "-",
        stdin=raw.replace('"dup"', '"dup2"'),
        check=False,
    )
    assert strict.returncode != 0 and "duplicate field" in strict.stderr, strict.stderr
