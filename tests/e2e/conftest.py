"""End-to-end fixtures: a real control plane per Kubernetes flavor (version and feature gates),
the chart installed into it, and the webhook running as a local process under the chart's
ServiceAccount.

Flavors run one after another (pytest finishes every test of one before starting the next);
`HAMI_E2E_FLAVORS=1.36,1.34-off` picks some. A test module says which flavors it needs with
`pytestmark = pytest.mark.e2e_on(capacity=True)` (or `capacity=False`, or `versions=("1.34",)`);
the others are deselected, not skipped. Without Go the tests skip and say so, unless HAMI_E2E_REQUIRED=1
(set by .ci/run), which turns that into a failure.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.controlplane.cluster import ControlPlane
from tests.controlplane.for_pytest import binaries_or_skip
from tests.controlplane.gpu_node import GpuNode
from tests.controlplane.versions import Flavor, UnknownFlavor, selected_flavors
from tests.support.cluster import RELEASE_NAMESPACE, Cluster, Release


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "cluster" in metafunc.fixturenames:
        try:
            flavors = selected_flavors()
        except UnknownFlavor as error:
            raise pytest.UsageError(str(error)) from error
        metafunc.parametrize(
            "cluster", flavors, indirect=True, scope="session", ids=[f.id for f in flavors]
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect a test on flavors its module does not apply to (e2e_on marker)."""
    kept, dropped = [], []
    for item in items:
        marker = item.get_closest_marker("e2e_on")
        callspec = getattr(item, "callspec", None)
        flavor = callspec.params.get("cluster") if callspec is not None else None
        if marker is not None and isinstance(flavor, Flavor):
            wanted = marker.kwargs.get("capacity")
            versions = marker.kwargs.get("versions")
            if (wanted is not None and flavor.capacity != wanted) or (
                versions is not None and flavor.minor not in versions
            ):
                dropped.append(item)
                continue
        kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(scope="session")
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    flavor: Flavor = request.param
    binaries = binaries_or_skip(flavor.release)
    folder = tmp_path_factory.mktemp(f"k8s-{flavor.id}")
    # As real clusters run it: node identities authorized by the Node authorizer and held to
    # their own Node by NodeRestriction (tests/e2e/test_red_team_four.py plays one).
    plane = ControlPlane(
        flavor.release,
        binaries,
        folder,
        consumable_capacity=flavor.capacity,
        authorization_modes="Node,RBAC",
        apiserver_args=("--enable-admission-plugins=NodeRestriction",),
    )
    plane.start()
    try:
        node = GpuNode.default()
        stored = node.register(plane)
        yield Cluster(plane, node, stored, folder)
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def hami(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    """The chart's default install (selfManaged certificates) in hami-system, its webhook up."""
    installed = Release(cluster, "hami-dra-webhook", RELEASE_NAMESPACE, sets=[])
    installed.install()
    installed.start(Path(tmp_path_factory.mktemp("webhook")))
    try:
        yield installed
    finally:
        installed.stop()


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace; afterwards its pods are gone and their devices free again."""
    name = cluster.create_namespace()
    yield name
    cluster.release_namespace(name)
