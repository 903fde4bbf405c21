"""The shells around the server: settings and flags, unexpected errors, the gc command."""

from __future__ import annotations

import asyncio
import io
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from hami_dra_webhook.admission.admitted import AdmissionRules
from hami_dra_webhook.admission.mutator import PodMutator
from hami_dra_webhook.certs.pki import issue, write
from hami_dra_webhook.cli.main import main
from hami_dra_webhook.cluster.templates.store import ApiTemplateStore
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from hami_dra_webhook.kube.client import KubernetesApi
from hami_dra_webhook.server.app import create_app
from hami_dra_webhook.server.metrics import Metrics
from hami_dra_webhook.server.services import Services
from hami_dra_webhook.server.settings import Settings
from hami_dra_webhook.server.tls import ReloadingTLS
from tests.support.cluster import Cluster
from tests.support.loop import run
from tests.support.reviews import replica_pod, review
from tests.support.templates import templates
from tests.support.webhook_process import free_port


class BrokenStore:
    async def ensure(
        self, namespace: str, templates: list[Any], *, dry_run: bool, deadline: float
    ) -> list[str]:
        raise RuntimeError("a bug")


@pytest.fixture
def broken_server(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """create_app() served by uvicorn in a thread, with a store that raises."""
    ca, cert, key = write(issue(["localhost"]), tmp_path)
    tls = ReloadingTLS(cert, key)
    services = Services(
        settings=Settings(),
        mutator=PodMutator(AdmissionRules(DEFAULT_POLICY), BrokenStore()),
        metrics=Metrics(),
        tls=tls,
    )
    port = free_port()
    config = uvicorn.Config(
        create_app(services),
        host="127.0.0.1",
        port=port,
        ssl_context_factory=lambda c, d: tls.context,
        log_config=None,
        lifespan="on",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()))
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    yield port, ca
    server.should_exit = True
    thread.join()


def test_an_unexpected_error_is_a_500_refusal_with_a_logged_traceback(
    broken_server: tuple[int, Path], caplog: pytest.LogCaptureFixture
) -> None:
    import http.client
    import ssl

    port, ca = broken_server
    connection = http.client.HTTPSConnection(
        "localhost", port, context=ssl.create_default_context(cafile=str(ca))
    )
    document = review(replica_pod())
    connection.request(
        "POST", "/mutate", body=json.dumps(document), headers={"Content-Type": "application/json"}
    )
    answer = connection.getresponse()
    body = json.loads(answer.read())
    connection.request("GET", "/nowhere")
    missing = connection.getresponse()
    missing_type = missing.getheader("Content-Type")
    missing.read()
    connection.close()
    assert answer.status == 200
    assert body["response"]["uid"] == document["request"]["uid"]
    assert body["response"]["allowed"] is False and body["response"]["status"]["code"] == 500
    assert "internal error" in body["response"]["status"]["message"]
    assert any(r.exc_info and "a bug" in str(r.exc_info[1]) for r in caplog.records)
    assert missing.status == 404 and missing_type == "application/json"


def test_settings_come_from_env_and_flags_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HAMI_DRA_PORT", "9443")
    monkeypatch.setenv("HAMI_DRA_TLS_MIN_VERSION", "1.2")
    assert Settings().port == 9443 and Settings().tls_min_version == "1.2"
    assert Settings(port=10443).port == 10443


@pytest.mark.parametrize(
    ("args", "fragment", "exit_code"),
    [
        (["--port", "0"], "--port (HAMI_DRA_PORT): Input should be greater than or equal to 1", 64),
        (["--gc-interval", "soon"], "'soon' is not a duration: write it as 90, 90s, 15m", 64),
        (["--ops-port", "8443"], "--ops-port must differ from --port", 3),
        (["--cert-file", "/x.crt"], "both --cert-file and --key-file", 3),
        (
            ["--cert-file", "/missing.crt", "--key-file", "/missing.key"],
            "cannot load the certificate",
            3,
        ),
        (["--config", "/missing.yaml"], "cannot read", 3),
        (["--kubeconfig", "/missing-kubeconfig"], "cannot load cluster access", 3),
    ],
)
def test_serve_refuses_bad_settings_with_a_message(
    args: list[str], fragment: str, exit_code: int
) -> None:
    """A flag's value that cannot be one is a usage error (64); what the settings cannot do
    together, or files that cannot be read, are 3."""
    err = io.StringIO()
    code = main(["serve", "--log-format", "text", *args], stdout=io.StringIO(), stderr=err)
    assert code == exit_code and fragment in err.getvalue() and "Traceback" not in err.getvalue()


def test_settings_of_seconds_take_durations() -> None:
    settings = Settings(gc_interval="10m", gc_grace="2h", drain_delay="500ms", cache_ttl=30)
    assert (settings.gc_interval, settings.gc_grace, settings.drain_delay) == (600, 7200, 0.5)
    assert settings.cache_ttl == 30


@pytest.mark.plane
def test_gc_command_one_pass(kube: Cluster, real_api: KubernetesApi) -> None:
    namespace = kube.create_namespace("gc-command")
    store = ApiTemplateStore(real_api)
    items = templates("1000", namespace)
    run(store.ensure(namespace, items, dry_run=False, deadline=time.monotonic() + 5))
    name = f"{namespace}/{items[0]['metadata']['name']}"
    time.sleep(1.1)  # stamps have whole seconds; the grace below is one second
    kubeconfig = str(kube.plane.admin_kubeconfig)
    gc = ["gc", "--kubeconfig", kubeconfig, "--grace", "1"]
    out, err = io.StringIO(), io.StringIO()
    assert main([*gc, "--dry-run"], stdout=out, stderr=err) == 0, err.getvalue()
    assert f"would delete {name}\n" in out.getvalue()
    assert kube.get("resourceclaimtemplates", "-n", namespace)["items"]
    out = io.StringIO()
    assert main(gc, stdout=out, stderr=err) == 0
    assert f"deleted {name}\n" in out.getvalue()
    assert kube.get("resourceclaimtemplates", "-n", namespace)["items"] == []
    kube.kubectl("create", "serviceaccount", "powerless", "-n", namespace)
    powerless = str(kube.service_account_kubeconfig(namespace, "powerless"))
    err = io.StringIO()
    assert main(["gc", "--kubeconfig", powerless], stdout=io.StringIO(), stderr=err) == 3
    assert "403 Forbidden" in err.getvalue()


def test_every_setting_is_a_flag_and_an_environment_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One source: the settings model. Its fields are the flags; the help shows each one's
    environment variable and default; an invalid environment value names both."""
    from hami_dra_webhook.server.settings import Settings

    assert main(["serve", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for name in Settings.model_fields:
        assert "--" + name.replace("_", "-") in text and f"HAMI_DRA_{name.upper()}" in text
    assert "(HAMI_DRA_PORT; default 8443)" in text
    monkeypatch.setenv("HAMI_DRA_MAX_CONCURRENCY", "none")
    err = io.StringIO()
    assert main(["serve"], stdout=io.StringIO(), stderr=err) == 3
    assert "--max-concurrency (HAMI_DRA_MAX_CONCURRENCY)" in err.getvalue()


def test_a_value_outside_the_choices_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["serve", "--tls-min-version", "1.1"])
    assert code == 64 and "--tls-min-version" in capsys.readouterr().err


def test_an_operations_port_in_use_is_a_start_up_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        err = io.StringIO()
        code = main(
            ["serve", "--log-format", "text", "--self-signed-dir", str(tmp_path),
             "--ops-host", "127.0.0.1", "--ops-port", str(port)],
            stdout=io.StringIO(), stderr=err,
        )  # fmt: skip
    assert code == 3 and f"--ops-port {port}" in err.getvalue()
    assert "Traceback" not in err.getvalue()


@pytest.mark.parametrize("grace", ["0", "-5", "inf", "soon"])
def test_gc_grace_must_be_a_positive_number(grace: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gc", "--grace", grace, "--dry-run"]) == 64
    assert "--grace" in capsys.readouterr().err


def test_the_serve_reference_lists_every_setting_with_its_default() -> None:
    from hami_dra_webhook.server.settings import Settings, env_name, flag

    readme = (Path(__file__).parents[2] / "docs" / "serve.md").read_text()
    rows = {
        line.split("|")[1].strip(" `"): line
        for line in readme.splitlines()
        if line.startswith("| `--")
    }
    for name, field in Settings.model_fields.items():
        row = rows.get(flag(name))
        assert row is not None, f"docs/serve.md: no row for {flag(name)}"
        assert f"`{env_name(name)}`" in row and str(field.description) in row
        if field.default_factory is None and field.default not in (None, ""):
            assert f"| {field.default} |" in row, row
    assert set(rows) <= {flag(name) for name in Settings.model_fields}


def test_serve_logs_what_the_legacy_settings_keep_or_lose_once(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Issue 64: deviceSplitCount and the like are said once at the start, not on every pod
    (core/vendors/nvidia_notes.policy_notes: the words every tool prints). The operations port
    is taken so that the server stops right after reading its settings."""
    config = tmp_path / "device-config.yaml"
    config.write_text("nvidia:\n  deviceSplitCount: 4\n  disableCoreLimit: true\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        code = main(
            ["serve", "--log-format", "text", "--self-signed-dir", str(tmp_path / "certs"),
             "--config", str(config), "--ops-host", "127.0.0.1",
             "--ops-port", str(taken.getsockname()[1])],
            stdout=io.StringIO(), stderr=io.StringIO(),
        )  # fmt: skip
    assert code == 3
    logged = capfd.readouterr().err  # the server's log handler writes to the process's stderr
    assert "nvidia.deviceSplitCount (4): legacy HAMi put at most that many tasks" in logged
    assert "GPU_CORE_UTILIZATION_POLICY=disable in every GPU container" in logged
