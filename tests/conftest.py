from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite the expected files of tests/cases from the current translation",
    )


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture
def standin():  # type: ignore[no-untyped-def]
    """A kube-apiserver stand-in (see tests/apiserver_standin.py), started and stopped per test."""
    from tests.apiserver_standin import StandIn

    server = StandIn().start()
    yield server
    server.stop()


@pytest.fixture
def kube_api(standin, tmp_path):  # type: ignore[no-untyped-def]
    """The real adapter (hami_dra_webhook.kube, official client) pointed at the stand-in."""
    from hami_dra_webhook.kube import KubernetesApi, load_configuration

    configuration = load_configuration(str(standin.kubeconfig(tmp_path)))
    assert configuration is not None
    api = KubernetesApi(configuration)
    yield api
    api.close()
