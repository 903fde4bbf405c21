"""`check`: every PASS, WARN and FAIL line, against the real kube-apiserver.

Each case makes one thing untrue in the shared control plane (a legacy DaemonSet, a quota, a
webhook configuration without caBundle, a slice of another driver, ...), runs `check`, and
takes it away again. Cases about the driver or DeviceClass point `check` at other names with
`--config` instead of breaking the cluster's own. A cluster with the gate off is the e2e suite's
(tests/e2e/test_operations.py).
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from hami_dra_webhook.certs.pki import issue, service_names
from hami_dra_webhook.cli.main import main
from tests.controlplane.cluster import free_port
from tests.controlplane.for_pytest import start_plane
from tests.controlplane.gpu_node import GpuNode
from tests.support.chart_driver import driver_binding, driver_daemonset
from tests.support.cluster import Cluster, wait_for
from tests.support.rest_calls import NotServed

DRIVER = "hami-core-gpu.project-hami.io"


@dataclass
class Setup:
    """The healthy installation a case starts from, and what the case added."""

    kube: Cluster
    namespace: str
    folder: Path
    args: list[str] = field(default_factory=list)
    created: list[tuple[str, str]] = field(default_factory=list)  # (kind, name)

    @property
    def release(self) -> str:
        return f"{self.namespace}-hami"

    def create(self, document: dict[str, Any], record: bool = True) -> None:
        """Create an object (applied over one an earlier step made); it is deleted after the
        test."""
        try:
            self.kube.create(document, self.namespace)
        except NotServed as error:
            if " 409 " not in str(error):
                raise
            self.kube.apply(document, namespace=self.namespace)
        if record:
            self.created.append((document["kind"].lower(), document["metadata"]["name"]))

    def config(self, **webhook: str) -> None:
        path = self.folder / "device-config.yaml"
        path.write_text(yaml.safe_dump({"hamiDraWebhook": webhook}))
        self.args += ["--config", str(path)]

    def webhook_configuration(self, ca_bundle: str | None, name: str | None = None) -> None:
        client: dict[str, Any] = {
            "service": {"name": self.release, "namespace": self.namespace, "path": "/mutate"}
        }
        if ca_bundle:
            client["caBundle"] = ca_bundle
        self.kube.kubectl(
            "delete", "mutatingwebhookconfiguration", name or self.release, "--ignore-not-found"
        )
        self.create(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": name or self.release},
                "webhooks": [
                    {
                        "name": "hami-dra-webhook.project-hami.io",
                        "clientConfig": client,
                        "admissionReviewVersions": ["v1"],
                        "sideEffects": "NoneOnDryRun",
                    }
                ],
            }
        )
        service = dict(client["service"], path="/validate-workloads")
        trusted = {"caBundle": ca_bundle} if ca_bundle else {}
        self.kube.kubectl(
            "delete", "validatingwebhookconfiguration", name or self.release, "--ignore-not-found"
        )
        self.create(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": name or self.release},
                "webhooks": [
                    {
                        "name": "workloads.hami-dra-webhook.project-hami.io",
                        "clientConfig": {"service": service, **trusted},
                        "admissionReviewVersions": ["v1"],
                        "sideEffects": "None",
                        "failurePolicy": "Ignore",
                    }
                ],
            }
        )


def _device_class(name: str, expression: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}], **spec},
    }


def _install(setup: Setup, days: int = 365) -> None:
    """What the chart and a running webhook leave behind, for this test's release name."""
    bundle = issue(service_names(setup.release, setup.namespace), days=days)
    setup.webhook_configuration(bundle.ca_bundle)
    setup.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": f"{setup.release}-tls"},
            "data": {"tls.crt": base64.b64encode(bundle.cert_pem).decode()},
        }
    )
    setup.create(
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": setup.release,
                "labels": {"kubernetes.io/service-name": setup.release},
            },
            "addressType": "IPv4",
            "endpoints": [
                {"addresses": ["10.1.0.1"], "conditions": {"ready": True}},
                {"addresses": ["10.1.0.2"], "conditions": {"ready": True}},
            ],
            "ports": [{"name": "https", "port": 8443, "protocol": "TCP"}],
        }
    )
    driver_pod(setup, "Running")
    driver_pod(setup, "Running", role="monitor")


# A driver image as a careful installation names it: a release after v0.1.0, by digest.
PINNED_DRIVER = "docker.io/projecthami/k8s-dra-driver:v0.2.0@sha256:" + "ab" * 32


def driver_pod(setup: Setup, phase: str, image: str = PINNED_DRIVER, role: str = "driver") -> None:
    """The chart's driver on the GPU node (driver.yaml; `role` monitor: its node monitor,
    monitor.yaml): its ServiceAccount, the ClusterRoleBinding that names it and its DaemonSet,
    whose pod kube-scheduler binds to the node; no kubelet runs here, so its status is written
    as a kubelet would."""
    name = f"{setup.release}-{role}"
    setup.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
    setup.create(driver_binding(name, setup.namespace))
    setup.create(driver_daemonset(name, "gpu-node-1", image), record=False)  # (recorded below)

    def bound() -> str | None:
        pods = setup.kube.pods(setup.namespace, f"app.kubernetes.io/instance={name}")
        found = [p for p in pods if p["spec"].get("nodeName") == "gpu-node-1"]
        return found[0]["metadata"]["name"] if found else None

    pod = wait_for(bound, f"the {role} DaemonSet's pod bound to the GPU node")
    # Deleted after the test in this order: the DaemonSet (its pod orphaned), then the pod at
    # once (no kubelet confirms a graceful end).
    setup.created += [("pod", pod), ("daemonset", name)]
    setup.kube.patch_status("pod", pod, setup.namespace, {"status": {"phase": phase}})


@pytest.fixture
def setup(kube: Cluster, tmp_path: Path) -> Iterator[Setup]:
    if not kube.exists("deviceclass", DRIVER):  # the chart's, shared by every test of this cluster
        kube.create(_device_class(DRIVER, f'device.driver == "{DRIVER}"'), "default")
    made = Setup(kube, kube.create_namespace("check"), tmp_path)
    _install(made)
    yield made
    # Deleted one by one and waited for: nothing a case made may reach the next case's `check`
    # (a namespace's deletion takes the namespace controller several seconds).
    for kind, name in reversed(made.created):
        # No kubelet runs here to confirm a pod's graceful end: pods go at once.
        grace = 0 if kind == "pod" else None
        kube.delete(kind, name, made.namespace, grace=grace, orphan=kind == "daemonset")
    wait_for(
        lambda: (
            not any(kube.exists(kind, name, "-n", made.namespace) for kind, name in made.created)
        ),
        "every object the case made gone",
    )
    kube.delete("namespace", made.namespace, "")


def check(setup: Setup, *extra: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    kubeconfig = str(setup.kube.plane.admin_kubeconfig)
    where = ["--webhook-namespace", setup.namespace, "--release", setup.release]
    code = main(
        ["check", "--kubeconfig", kubeconfig, *where, *setup.args, *extra], stdout=out, stderr=err
    )
    return code, out.getvalue(), err.getvalue()


@pytest.mark.plane
def test_a_healthy_cluster_passes(setup: Setup) -> None:
    code, out, _ = check(setup)
    assert code == 0, out
    lines = [line for line in out.splitlines() if line[:4] in ("PASS", "WARN", "FAIL")]
    assert len(lines) == 19 and all(line.startswith("PASS") for line in lines), out
    assert "PASS  node monitor: running on all 1 DRA GPU node(s)" in out
    assert "PASS  workloads' preview: kubectl apply of a workload says what its pods become" in out
    assert "GPU pools: disjoint: 0 legacy node(s), 1 DRA node(s), no node in both" in out
    assert "POOL" not in out  # no legacy pool: no table of pools
    assert "3 shareable GPUs on 1 node" in out
    assert "gpu-node-1                         3  yes        24Gi, 80Gi" in out
    assert "2 ready endpoint(s)" in out


@pytest.mark.plane
def test_a_tenants_pod_labelled_as_the_driver_is_not_the_driver(setup: Setup) -> None:
    """Issue 61: a tenant's namespace enforcing `restricted`, with a Ready pod of its own
    labelled as the driver on the GPU node: `check` judges the chart's driver only (its
    namespace's Pod Security), and never names the tenant's namespace."""
    tenant = setup.kube.create_namespace("tenant")
    try:
        setup.kube.kubectl(
            "label", "namespace", tenant, "pod-security.kubernetes.io/enforce=restricted"
        )
        lookalike = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "driver", "labels": {"app.kubernetes.io/component": "dra-driver"}},
            "spec": {
                "nodeName": "gpu-node-1",
                "securityContext": {
                    "runAsNonRoot": True,
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                "containers": [
                    {
                        "name": "plugin",
                        "image": "tenant/own:v1",
                        "securityContext": {
                            "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]},
                        },
                    }
                ],
            },
        }
        setup.kube.apply(lookalike, namespace=tenant)
        code, out, _ = check(setup)
        assert code == 0, out
        assert tenant not in out, out
        assert f"PASS  pod security: {setup.namespace} admits the privileged driver" in out, out
    finally:
        setup.kube.kubectl("delete", "pods", "--all", "-n", tenant, "--grace-period=0", "--force")
        setup.kube.kubectl("delete", "namespace", tenant, "--wait=false")


def _slice(setup: Setup, driver: str, drop: Callable[[dict[str, Any]], None]) -> None:
    resource_slice = setup.kube.node.resource_slice()
    resource_slice["metadata"]["name"] = f"{setup.namespace}-{driver}"
    resource_slice["spec"]["driver"] = driver
    resource_slice["spec"]["pool"]["name"] = f"{setup.namespace}-pool"
    for device in resource_slice["spec"]["devices"]:
        drop(device)
    setup.create(resource_slice)
    setup.config(driverName=driver)


def _not_shareable(device: dict[str, Any]) -> None:
    # kube-apiserver refuses a requestPolicy on a device that is not multi-allocatable.
    device.pop("allowMultipleAllocations")
    for capacity in device["capacity"].values():
        capacity.pop("requestPolicy")


def _other_driver_not_shareable(setup: Setup) -> None:
    _slice(setup, f"{setup.namespace}.example.com", _not_shareable)


def _legacy_workload(kind: str, name: str, image: str) -> Callable[[Setup], None]:
    def create(setup: Setup) -> None:
        labels = {"app": name}
        spec: dict[str, Any] = {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": image}]},
            },
        }
        if kind == "Deployment":
            spec["replicas"] = 0
        else:
            spec["template"]["spec"]["nodeSelector"] = {"no-such-node": "true"}
        setup.create(
            {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}
        )

    return create


def _legacy_quota(setup: Setup) -> None:
    setup.create(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "gpus"},
            "spec": {"hard": {"requests.nvidia.com/gpu": "8", "limits.nvidia.com/gpumem": "64000"}},
        }
    )


def _legacy_webhook(setup: Setup) -> None:
    name = f"{setup.namespace}-legacy"
    setup.create(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [
                {
                    "name": "vgpu.hami.io",
                    "clientConfig": {"url": "https://legacy.invalid/webhook"},
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                }
            ],
        }
    )


def _no_driver_pod(setup: Setup) -> None:
    name = f"{setup.release}-driver"
    setup.kube.kubectl("delete", "daemonset", name, "-n", setup.namespace, "--cascade=orphan")
    selector = f"app.kubernetes.io/instance={name}"
    setup.kube.kubectl(
        "delete", "pod", "-l", selector, "-n", setup.namespace, "--grace-period=0", "--force"
    )


def _restricted_namespace(setup: Setup) -> None:
    setup.kube.kubectl(
        "label", "namespace", setup.namespace, "pod-security.kubernetes.io/enforce=restricted"
    )


# Every case's judging is tested over plain data (tests/preflight/test_checks.py); these run
# end to end, one for each kind of read (an object by name, a list, node-side state, the
# webhook's own objects), so that what `gather` reads is what the real API server holds.
BROKEN: dict[str, tuple[Callable[[Setup], None], str, str]] = {
    "no-driver-pod": (
        _no_driver_pod,
        "FAIL  driver pods: GPU nodes without a driver pod: gpu-node-1",
        "nodeAffinity",
    ),
    "restricted-namespace": (
        _restricted_namespace,
        "FAIL  pod security: the driver is privileged, but {ns} (restricted) enforces less",
        "driver.namespace",
    ),
    "no-device-class": (
        lambda s: s.config(deviceClassName=f"{s.namespace}.example.com"),
        "does not exist",
        "deviceClass.create=true",
    ),
    "not-shareable": (
        _other_driver_not_shareable,
        "FAIL  driver: devices not multi-allocatable on gpu-node-1",
        "DRAConsumableCapacity",
    ),
    "legacy-plugin-everywhere": (
        _legacy_workload("DaemonSet", "hami-device-plugin", "projecthami/hami:v2.10.0"),
        "FAIL  legacy HAMi: HAMi's device plugin DaemonSet {ns}/hami-device-plugin can run on"
        " DRA-pool nodes",
        "keep it to hami.io/gpu-pool=legacy nodes",
    ),
    "wrong-ca": (
        lambda s: s.webhook_configuration(issue(["x"]).ca_bundle),
        "FAIL  webhook certificate: the caBundle does not verify",
        "restart",
    ),
    "legacy-quota": (
        _legacy_quota,
        "WARN  quotas: ResourceQuotas count legacy resources",
        "deviceclass.resource.k8s.io/devices",
    ),
    "no-endpoints": (
        lambda s: s.kube.kubectl("delete", "endpointslice", s.release, "-n", s.namespace),
        "FAIL  webhook service: no ready endpoint",
        "failurePolicy",
    ),
}


@pytest.mark.plane
@pytest.mark.parametrize("case", sorted(BROKEN))
def test_each_problem_has_its_line_and_fix(setup: Setup, case: str) -> None:
    breaking, line, fix = BROKEN[case]
    breaking(setup)
    code, out, _ = check(setup)
    assert line.format(ns=setup.namespace) in out, out
    assert "fix: " in out and fix in out
    assert code == (1 if line.startswith("WARN") else 2)


@pytest.mark.plane
def test_legacy_hami_kept_to_its_pool_runs_beside(setup: Setup) -> None:
    """HAMi's scheduler and webhook, and no device plugin that could reach a DRA node: a
    cluster in staged migration (docs/migration.md)."""
    _legacy_workload("Deployment", "hami-scheduler", "projecthami/hami:v2.10.0")(setup)
    _legacy_webhook(setup)
    code, out, _ = check(setup)
    assert code == 0, out
    assert (
        "PASS  legacy HAMi: running beside DRA, kept to the legacy pool: scheduler Deployment"
        f" {setup.namespace}/hami-scheduler; webhook {setup.namespace}-legacy"
    ) in out, out


@pytest.mark.plane
def test_expiring_certificate_fails(setup: Setup) -> None:
    setup.kube.kubectl("delete", "secret", f"{setup.release}-tls", "-n", setup.namespace)
    _install(setup, days=10)
    code, out, _ = check(setup)
    assert code == 2 and "the serving certificate expires in 9 days" in out


@pytest.mark.plane
def test_json_output(setup: Setup) -> None:
    _legacy_quota(setup)
    code, out, _ = check(setup, "-o", "json")
    report = json.loads(out)
    assert code == 1 and report["worst"] == "WARN"
    assert {c["check"]: c["level"] for c in report["checks"]}["quotas"] == "WARN"
    assert [n["node"] for n in report["nodes"]] == ["gpu-node-1"]


def check_alone(folder: Path, minor: str, *apiserver_args: str) -> tuple[int, str]:
    """`check` against a kube-apiserver of its own (no controllers), started for one test."""
    plane = start_plane(
        minor, folder, capacity=True, controllers=False, apiserver_args=apiserver_args
    )
    try:
        out = io.StringIO()
        kubeconfig = str(plane.admin_kubeconfig)
        code = main(["check", "--kubeconfig", kubeconfig], stdout=out, stderr=io.StringIO())
    finally:
        plane.stop()
    return code, out.getvalue()


def test_kubernetes_1_34_is_warned_about(tmp_path: Path) -> None:
    """kube-apiserver 1.34 (gate on): the version line warns that GPU sharing needs 1.35+."""
    _, out = check_alone(tmp_path, "1.34")
    assert "WARN  Kubernetes: v1.34.4: kube-scheduler 1.34 does not place shared GPUs" in out
    assert "share GPUs on Kubernetes 1.35 or later" in out


@pytest.mark.plane
def test_an_unreachable_cluster_exits_3(setup: Setup, tmp_path: Path) -> None:
    unreachable = setup.kube.plane.kubeconfig("nobody-listens")
    text = unreachable.read_text().replace(
        setup.kube.plane.server, f"https://127.0.0.1:{free_port()}"
    )
    unreachable.write_text(text)
    out, err = io.StringIO(), io.StringIO()
    assert main(["check", "--kubeconfig", str(unreachable)], stdout=out, stderr=err) == 3
    assert "did not answer: nothing answers at https://127.0.0.1:" in err.getvalue()
    assert "(connection refused) (GET https://127.0.0.1:" in err.getvalue()
    assert "ClientConnectorError" not in err.getvalue()


def test_a_cluster_without_the_dra_api(tmp_path: Path) -> None:
    """kube-apiserver with resource.k8s.io switched off (--runtime-config) says so."""
    code, out = check_alone(tmp_path, "1.36", "--runtime-config=resource.k8s.io/v1=false")
    assert code == 2
    assert "FAIL  resource.k8s.io/v1: not served" in out
    assert "use Kubernetes 1.34 or later" in out


@pytest.mark.plane
def test_cluster_access_is_found_as_kubectl_finds_it(
    setup: Setup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$KUBECONFIG, then ~/.kube/config, and --context: check, gc and scan --cluster alike."""
    plane = setup.kube.plane
    config = json.loads(plane.admin_kubeconfig.read_text())
    broken = json.loads(json.dumps(config["clusters"][0]))
    broken["name"] = "nowhere"
    broken["cluster"]["server"] = f"https://127.0.0.1:{free_port()}"
    config["clusters"].append(broken)
    config["contexts"].append(
        {"name": "nowhere", "context": {"cluster": "nowhere", "user": "admin"}}
    )
    good_context = config["current-context"]
    config["current-context"] = "nowhere"
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    for where in ("env", "home"):
        if where == "env":
            path = tmp_path / "kubeconfig"
            monkeypatch.setenv("KUBECONFIG", str(path))
        else:
            path = home / ".kube" / "config"
            monkeypatch.delenv("KUBECONFIG")
        path.write_text(json.dumps(config))
        out, err = io.StringIO(), io.StringIO()
        assert main(["check"], stdout=out, stderr=err) == 3, where  # the current context
        assert "did not answer" in err.getvalue()
        out, err = io.StringIO(), io.StringIO()
        main(["check", "--context", good_context], stdout=out, stderr=err)
        assert "PASS  resource.k8s.io/v1" in out.getvalue(), (where, err.getvalue())
        gc = ["gc", "--context", good_context, "--dry-run"]
        assert main(gc, stdout=io.StringIO(), stderr=io.StringIO()) == 0
        scan = ["scan", "--cluster", "-n", setup.namespace, "--context", good_context]
        assert main(scan, stdin=io.StringIO(), stdout=io.StringIO(), stderr=io.StringIO()) == 0
    path.unlink()
    err = io.StringIO()
    assert main(["check"], stdout=io.StringIO(), stderr=err) == 3
    assert "no --kubeconfig, $KUBECONFIG or ~/.kube/config" in err.getvalue()


def test_before_install_checks_only_what_must_hold_before_the_chart(tmp_path: Path) -> None:
    """A bare 1.37 control plane: nothing installed, no GPU node. The plain check FAILs on the
    chart's own parts (DeviceClass, driver, webhook); --before-install leaves them out, probes
    consumable capacity in `default` (the chart's namespace does not exist yet) and says how to
    go on. With a legacy HAMi device plugin it says to move in stages."""
    plane = start_plane("1.37", tmp_path, capacity=True, controllers=False)
    try:
        kubeconfig = str(plane.admin_kubeconfig)

        def run(*extra: str) -> tuple[int, str]:
            out = io.StringIO()
            code = main(["check", "--kubeconfig", kubeconfig, *extra], stdout=out)
            return code, out.getvalue()

        code, plain = run()
        assert code == 2 and "FAIL  DeviceClass" in plain
        code, before = run("--before-install")
        checks = [line.split(":")[0] for line in before.splitlines() if line[:4].strip()]
        assert checks == [
            "PASS  Kubernetes",
            "PASS  resource.k8s.io/v1",
            "PASS  consumable capacity",
            "PASS  extended resources",
            "PASS  quotas",
            "WARN  GPU nodes",
            "PASS  legacy HAMi",
        ], before
        assert code == 1 and "legacy HAMi: not running: install the chart as it is" in before
        kube = Cluster(plane, GpuNode.default(), {}, tmp_path)  # no node registered
        kube.kubectl("create", "namespace", "hami")
        kube.apply(
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {"name": "hami-device-plugin", "namespace": "hami"},
                "spec": {
                    "selector": {"matchLabels": {"app": "p"}},
                    "template": {
                        "metadata": {"labels": {"app": "p"}},
                        "spec": {
                            "containers": [{"name": "p", "image": "projecthami/hami:v2.10.0"}]
                        },
                    },
                },
            },
            namespace="hami",
        )
        code, before = run("--before-install")
        assert code == 1
        assert "WARN  legacy HAMi: this cluster runs legacy HAMi (device plugin DaemonSet" in before
        assert "move in stages (docs/migration.md)" in before
    finally:
        plane.stop()


@pytest.mark.plane
def test_a_namespace_that_does_not_exist_is_no_dropped_capacity(setup: Setup) -> None:
    """Issue 65: the chart's namespace absent (a wrong -n, or not installed yet) made the
    capacity probe's 404 read as "kube-apiserver drops capacity requests", and sent the user
    to change feature gates that are on. The probe then runs in `default`."""
    _, out, _ = check(setup, "--webhook-namespace", "no-such-namespace")
    assert "PASS  consumable capacity: a dry-run claim keeps its capacity request" in out, out
