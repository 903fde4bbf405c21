"""Issue 46 (red team, round four) through the real kube-apiserver, with the chart installed:
each finding as the red team found it, now held.

1. What holds the driver's devices is read from the allocated claims: a converted pod whose
   tenant removed its `hami.io/dra` label, a pod given a whole GPU by kube-scheduler through a
   DeviceClass's extendedResourceName (KEP-5004), and a pod with a claim of its own are all
   holders for `migrate status` and the plan of `migrate node --to legacy` (the move itself
   runs on the real node: tests/node/test_staged_moves.py).
2. A Volcano Job gets the refusal a pod gets where kube-apiserver drops consumable capacity.
3. A Volcano Job follows migration.scope `namespaces` (its webhook's namespace term).
5. With the bridge on, a privileged count-only pod is refused by the chart's policy.
6. A node's own identity (Node authorizer and NodeRestriction on, as on real clusters) cannot
   set the GPU pool label or a move's state on its Node.

The GPU node is the control plane's stand-in (no kubelet): pods are bound and their claims
allocated by the real kube-scheduler, nothing runs.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hami_dra_webhook.cli.main import main
from tests.e2e.test_volcano_jobs import install_job_crd, job
from tests.support.cluster import Cluster, Release, wait_for
from tests.support.pods import gpu_pod

DRIVER = "hami-core-gpu.project-hami.io"
NODE = "gpu-node-1"  # tests/controlplane/gpu_node.py
OPT_IN = "hami.io/gpu-migration"


def migrate(cluster: Cluster, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    kubeconfig = str(cluster.plane.admin_kubeconfig)
    code = main(["migrate", *args, "--kubeconfig", kubeconfig], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _allocated(cluster: Cluster, namespace: str, pod: str) -> dict[str, Any] | None:
    """The pod once bound and every claim it uses allocated."""
    found = cluster.pod(namespace, pod)
    if not found["spec"].get("nodeName"):
        return None
    status = found.get("status") or {}
    names = [e["resourceClaimName"] for e in status.get("resourceClaimStatuses") or []]
    names += [
        c["resourceClaimName"]
        for c in found["spec"].get("resourceClaims") or []
        if c.get("resourceClaimName")
    ]
    extended = status.get("extendedResourceClaimStatus")
    names += [extended["resourceClaimName"]] if extended else []
    claims = [cluster.get("resourceclaim", n, "-n", namespace) for n in names]
    return found if claims and all(c["status"].get("allocation") for c in claims) else None


def _own_claim(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": DRIVER,
                            "capacity": {"requests": {"memory": "1Gi", "cores": "10"}},
                        },
                    }
                ]
            }
        },
    }


def _pod_with_claim(name: str, claim: str) -> dict[str, Any]:
    pod = gpu_pod(name, {}, resourceClaims=[{"name": "gpu", "resourceClaimName": claim}])
    pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    return pod


@pytest.mark.e2e_on(capacity=True, versions=("1.37",))
def test_holders_of_the_drivers_devices_are_found_by_their_claims(
    cluster: Cluster, hami: Release, namespace: str
) -> None:
    """Finding 1: the three pods the red team left on a node moved to legacy are holders in
    `migrate status` and in the move's plan; the bridge pod uses no legacy slot."""
    bridge_namespace = cluster.create_namespace("bridge")
    cluster.kubectl("label", "namespace", bridge_namespace, "hami.io/webhook=ignore")
    bridge_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "e2e-bridge"},
        "spec": {
            "extendedResourceName": "example.com/whole-gpu",
            "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
        },
    }
    cluster.apply(bridge_class, namespace="default")
    try:
        cluster.apply(
            gpu_pod("unlabelled", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1100}),
            namespace=namespace,
        )
        cluster.apply(_own_claim("mine"), namespace=namespace)
        cluster.apply(_pod_with_claim("own", "mine"), namespace=namespace)
        cluster.apply(gpu_pod("bridge", {"example.com/whole-gpu": 1}), namespace=bridge_namespace)
        for where, name in (
            (namespace, "unlabelled"),
            (namespace, "own"),
            (bridge_namespace, "bridge"),
        ):
            wait_for(
                lambda w=where, n=name: _allocated(cluster, w, n), f"{where}/{name} allocated", 60
            )
        cluster.kubectl("label", "pod", "unlabelled", "hami.io/dra-", "-n", namespace)
        bridge = cluster.pod(bridge_namespace, "bridge")
        assert bridge["status"].get("extendedResourceClaimStatus"), bridge["status"]

        code, out, err = migrate(cluster, "status", "-o", "json")
        assert code == 0, err
        status = json.loads(out)
        assert status["namespaces"][namespace]["converted"] == 2, status
        assert status["namespaces"][namespace]["legacy"] == 0, status
        assert status["namespaces"][bridge_namespace]["converted"] == 1, status
        assert status["pools"]["legacy"]["slotsUsed"] == 0, status

        code, out, err = migrate(cluster, "node", NODE, "--to", "legacy", "--dry-run", "-o", "json")
        assert code == 2, out + err  # bare pods, and no other DRA node: blockers
        plan = {(s["namespace"], s["name"]) for s in json.loads(out)["plan"]}
        assert {(namespace, "unlabelled"), (namespace, "own"), (bridge_namespace, "bridge")} <= plan
    finally:
        cluster.release_namespace(bridge_namespace)
        cluster.kubectl("delete", "deviceclass", "e2e-bridge")
        # The tenant's own claim outlives its pod: deleted with it, for the namespace's end.
        cluster.kubectl("delete", "pod", "own", "-n", namespace, "--grace-period=0", "--force")
        cluster.kubectl("delete", "resourceclaim", "mine", "-n", namespace, "--wait=false")


@pytest.fixture(scope="module")
def scoped_volcano(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    """Volcano's Job CRD and a release converting Volcano Jobs with migration.scope
    namespaces (its pod webhook selects opted-in namespaces only)."""
    install_job_crd(cluster)
    release = Release(
        cluster,
        "scoped",
        "hami-scoped",
        sets=[
            "volcano.convertJobs=true",
            "migration.scope=namespaces",
            "deviceClass.create=false",
            "driver.enabled=false",
        ],
    )
    release.install()
    try:
        release.start(Path(tmp_path_factory.mktemp("scoped-webhook")))
        yield release
    finally:
        release.uninstall()


def _task_limits(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    stored = cluster.get("jobs.batch.volcano.sh", name, "-n", namespace)
    resources = stored["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]
    return dict(resources.get("limits") or {})


@pytest.mark.e2e_on(capacity=False, versions=("1.34",))
def test_a_volcano_job_is_refused_where_capacity_is_dropped(
    cluster: Cluster, scoped_volcano: Release, namespace: str
) -> None:
    """Finding 2: on 1.34 with DRAConsumableCapacity off a shared-GPU Volcano task was
    admitted and its template asked for whole devices; it is refused as the pod is. A whole
    GPU is still converted."""
    cluster.kubectl("label", "namespace", namespace, f"{OPT_IN}=dra")
    shared = job("shared", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000})
    refused = cluster.kubectl(
        "create", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(shared), check=False
    )
    assert refused.returncode != 0
    assert "drops DRA consumable capacity" in refused.stderr, refused.stderr
    assert not cluster.get("resourceclaimtemplates", "-n", namespace)["items"]
    cluster.apply(job("whole", {"nvidia.com/gpu": 1}), namespace=namespace)
    assert _task_limits(cluster, namespace, "whole") == {}


@pytest.mark.e2e_on(capacity=True, versions=("1.37",))
def test_a_volcano_job_follows_the_namespace_scope(
    cluster: Cluster, scoped_volcano: Release, namespace: str
) -> None:
    """Finding 3: with scope `namespaces`, a namespace not opted in kept its legacy pods but
    its Volcano Job was converted. Now the Job stays legacy there, and converts once the
    namespace opts in. With scope `workloads`, only a task template labelled for it converts
    (a label on the Job itself is not its pods')."""
    limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 2000}
    cluster.apply(job("before", limits), namespace=namespace)
    assert _task_limits(cluster, namespace, "before") == limits
    cluster.kubectl("label", "namespace", namespace, f"{OPT_IN}=dra")
    cluster.apply(job("after", limits), namespace=namespace)
    assert _task_limits(cluster, namespace, "after") == {}

    # Scope `workloads`: the opt-in is read on each task template, the Job's labels aside.
    scoped_volcano.upgrade("--set", "migration.scope=workloads")
    scoped_volcano.restart()
    cluster.kubectl("label", "namespace", namespace, f"{OPT_IN}-")
    labelled = job("opted", limits)
    labelled["metadata"]["labels"] = {OPT_IN: "dra"}  # on the Job: not its pods' label
    cluster.apply(labelled, namespace=namespace)
    assert _task_limits(cluster, namespace, "opted") == limits
    template = job("template", limits)
    template["spec"]["tasks"][0]["template"]["metadata"] = {"labels": {OPT_IN: "dra"}}
    cluster.apply(template, namespace=namespace)
    assert _task_limits(cluster, namespace, "template") == {}


@pytest.mark.e2e_on(capacity=True, versions=("1.37",))
def test_the_bridge_refuses_privileged_count_only_pods(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory, namespace: str
) -> None:
    """Finding 5: with wholeGpusByExtendedResource a privileged `nvidia.com/gpu: 1` pod got a
    whole card from kube-scheduler; the chart's privileged-GPU policy now names the count
    resource (in an opted-out namespace too: no webhook is involved)."""
    values = tmp_path_factory.mktemp("bridge") / "values.yaml"
    config = "nvidia: {}\nhamiDraWebhook:\n  wholeGpusByExtendedResource: true\n"
    values.write_text(yaml.safe_dump({"deviceConfig": config}))
    # No webhook of this release runs: its GPU quota gate (called for every GPU pod) is off.
    release = Release(
        cluster,
        "bridge",
        "hami-bridge",
        sets=["deviceClass.create=false", "driver.enabled=false", "gpuQuota.enabled=false"],
        values_file=values,
    )
    release.install()
    cluster.kubectl("label", "namespace", namespace, "hami.io/webhook=ignore")
    try:
        privileged = gpu_pod("p", {"nvidia.com/gpu": 1})
        privileged["spec"]["containers"][0]["securityContext"] = {"privileged": True}

        def refused() -> str | None:
            done = cluster.kubectl(
                "create", "-n", namespace, "--dry-run=server", "-f", "-",
                stdin=json.dumps(privileged), check=False,
            )  # fmt: skip
            return done.stderr if done.returncode != 0 else None

        said = wait_for(refused, "the policy in force", 30)
        assert "is privileged in a pod that holds GPUs" in said, said
        privileged["spec"]["containers"][0].pop("securityContext")
        assert refused() is None
    finally:
        release.uninstall()


def _as_node(cluster: Cluster, node: str, *args: str, stdin: str | None = None) -> str:
    """kubectl as the kubelet of `node`; its error text when refused, "" when allowed."""
    flags = [f"--as=system:node:{node}", "--as-group=system:nodes"]
    done = cluster.kubectl(*flags, *args, "--dry-run=server", stdin=stdin, check=False)
    return "" if done.returncode == 0 else done.stderr


@pytest.mark.e2e_on(capacity=True, versions=("1.37",))
def test_a_node_cannot_write_its_pool_or_its_move_state(cluster: Cluster, hami: Release) -> None:
    """Finding 6: system:node:<name> patched its own Node to hami.io/gpu-pool=legacy with a
    forged move state (200). It may still write its other labels (NodeRestriction is on: it
    refuses the protected prefix), but not the pool label or the move's state; an
    administrator may."""
    refused = "a node's own identity may not set the label hami.io/gpu-pool"
    assert _as_node(cluster, NODE, "label", "node", NODE, "example.com/probe=1") == ""
    assert "node-restriction.kubernetes.io" in _as_node(
        cluster, NODE, "label", "node", NODE, "node-restriction.kubernetes.io/probe=1"
    )
    for value in ("dra", "legacy", "moving"):
        said = _as_node(cluster, NODE, "label", "node", NODE, f"hami.io/gpu-pool={value}")
        assert refused in said, said
    forged = json.dumps({"to": "dra", "from": "legacy", "step": "served", "cordonedByMove": True})
    said = _as_node(cluster, NODE, "annotate", "node", NODE, f"hami.io/gpu-pool-move={forged}")
    assert refused in said, said
    cluster.kubectl("label", "node", NODE, "hami.io/gpu-pool=dra", "--dry-run=server")
    # Registering: as legacy or unlabelled, never into the DRA pool.
    new = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-node-9", "labels": {}}}
    assert _as_node(cluster, "gpu-node-9", "create", "-f", "-", stdin=json.dumps(new)) == ""
    new["metadata"]["labels"] = {"hami.io/gpu-pool": "legacy"}
    assert _as_node(cluster, "gpu-node-9", "create", "-f", "-", stdin=json.dumps(new)) == ""
    new["metadata"]["labels"] = {"hami.io/gpu-pool": "dra"}
    said = _as_node(cluster, "gpu-node-9", "create", "-f", "-", stdin=json.dumps(new))
    assert refused in said, said


@pytest.mark.e2e_on(capacity=True, versions=("1.37",))
def test_a_forged_move_state_skips_nothing(cluster: Cluster, hami: Release, namespace: str) -> None:
    """Finding 6, the tool's side: a move state the tool did not write (here by an
    administrator's hand; a node's own identity is refused above) said `served`, and the next
    `migrate node` skipped the drain and just uncordoned. Now a resumed move cordons and drains
    again: the converted pod holding the node's GPU is evicted (it stays Terminating: no
    kubelet), the move times out draining, exit 3, and the node stays cordoned."""
    cluster.apply(
        gpu_pod("held", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000}), namespace=namespace
    )
    wait_for(lambda: _allocated(cluster, namespace, "held"), "the pod's claim allocated", 60)
    forged = json.dumps({"to": "legacy", "from": "dra", "step": "served", "cordonedByMove": True})
    cluster.kubectl("annotate", "node", NODE, f"hami.io/gpu-pool-move={forged}")
    try:
        code, out, err = migrate(
            cluster, "node", NODE, "--to", "legacy", "--force", "--timeout", "8s", "-o", "json"
        )
        assert code == 3, out + err
        result = json.loads(out)
        assert "timed out draining" in result["error"] and "held" in result["error"], result
        assert [s["step"] for s in result["timeline"]][:2] == ["resumed", "evicted"], result
        node = cluster.get("node", NODE)
        assert node["spec"].get("unschedulable") is True
        assert cluster.pod(namespace, "held")["metadata"].get("deletionTimestamp")
    finally:
        cluster.kubectl("annotate", "node", NODE, "hami.io/gpu-pool-move-")
        cluster.kubectl("uncordon", NODE)
