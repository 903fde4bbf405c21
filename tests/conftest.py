from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite the expected files of tests/cases from the current translation",
    )


# The fixtures that start or share a real control plane. The tier a test runs in is seen from
# where it lives: tests/e2e and tests/node are on control planes by their folder (marked `plane`
# here); elsewhere a test on the shared plane says so itself, `@pytest.mark.plane` (or its
# module's `pytestmark`), and collection stops, naming it, where what a test says and what it
# uses differ.
PLANE_FIXTURES = frozenset({"kube", "real_api", "cluster"})
PLANE_FOLDERS = ("tests/e2e/", "tests/node/")


def plane_mismatches(items: list[pytest.Item]) -> list[str]:
    """The tests outside PLANE_FOLDERS whose `plane` mark and fixtures disagree, with what to
    do; the tests inside them get the mark."""
    wrong = []
    for item in items:
        uses = bool(PLANE_FIXTURES & set(getattr(item, "fixturenames", ())))
        if item.nodeid.startswith(PLANE_FOLDERS):
            if uses:
                item.add_marker(pytest.mark.plane)
            continue
        says = item.get_closest_marker("plane") is not None
        if uses and not says:
            wrong.append(f"{item.nodeid} uses a control plane: mark it @pytest.mark.plane")
        elif says and not uses:
            wrong.append(f"{item.nodeid} is marked plane and uses none: remove the mark")
    return wrong


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wrong = plane_mismatches(items)
    if wrong:
        raise pytest.UsageError("the tier of a test is its own to say:\n" + "\n".join(wrong))


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture
def standin():  # type: ignore[no-untyped-def]
    """A kube-apiserver stand-in (see tests/support/apiserver_standin.py), started and stopped per test."""
    from tests.support.apiserver_standin import StandIn

    server = StandIn().start()
    yield server
    server.stop()


@pytest.fixture
def standin_api(standin, tmp_path):  # type: ignore[no-untyped-def]
    """The real adapter (hami_dra_webhook.kube.client, official client) pointed at the fault stand-in."""
    from hami_dra_webhook.kube.client import KubernetesApi
    from hami_dra_webhook.kube.connect import load_configuration
    from tests.support.loop import run

    configuration = run(load_configuration(str(standin.kubeconfig(tmp_path))))
    assert configuration is not None
    api = KubernetesApi(configuration)
    yield api
    run(api.close())


@pytest.fixture(scope="session")
def kube(tmp_path_factory):  # type: ignore[no-untyped-def]
    """A real control plane (Kubernetes 1.36: etcd, kube-apiserver, kube-controller-manager,
    kube-scheduler) with a GPU node, shared by the tests that talk to the Kubernetes API;
    each test works in namespaces of its own (`kube.create_namespace()`)."""
    from tests.controlplane.for_pytest import start_plane
    from tests.controlplane.gpu_node import GpuNode
    from tests.support.cluster import Cluster

    plane = start_plane("1.36", tmp_path_factory.mktemp("kube"), capacity=True)
    try:
        node = GpuNode.default()
        yield Cluster(plane, node, node.register(plane), plane.folder)
    finally:
        plane.stop()


@pytest.fixture
def real_api(kube):  # type: ignore[no-untyped-def]
    """The real adapter (hami_dra_webhook.kube.client, official client) on the real kube-apiserver."""
    from tests.support.cluster import api_for
    from tests.support.loop import run

    api = api_for(kube.plane.admin_kubeconfig)
    yield api
    run(api.close())


@pytest.fixture(autouse=True)
def _fresh_translation_caches() -> None:
    """Each test starts with the core's caches empty, so that what a test checks is computed in
    it: mutation testing (scripts/mutation) runs a mutant against the tests that call the
    mutated function, and a cache filled by an earlier test would hide the call."""
    from hami_dra_webhook.core.legacy import selectors
    from hami_dra_webhook.core.translate import claims
    from hami_dra_webhook.core.vendors import families, nvidia

    claims._content.cache_clear()
    selectors._device_filter.cache_clear()
    nvidia._device_ask.cache_clear()
    families.forget_families()
