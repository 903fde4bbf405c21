"""Background jobs under one supervisor: a job that dies is logged, counted and restarted with
a backoff, and /readyz fails while a job the webhook needs is down."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from hami_dra_webhook.admission.admitted import AdmissionRules
from hami_dra_webhook.admission.mutator import PodMutator
from hami_dra_webhook.certs.pki import issue, write
from hami_dra_webhook.cluster.templates.store import OfflineTemplateStore
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from hami_dra_webhook.server.app import _lifespan
from hami_dra_webhook.server.jobs import background_jobs
from hami_dra_webhook.server.logs import AdmissionLog
from hami_dra_webhook.server.metrics import Metrics
from hami_dra_webhook.server.operations import readiness
from hami_dra_webhook.server.services import Services
from hami_dra_webhook.server.settings import Settings
from hami_dra_webhook.server.supervisor import Job, Supervisor
from hami_dra_webhook.server.tls import ReloadingTLS
from tests.support.loop import run


class Dies:
    """A job that raises the first `times` times it is started, then runs until cancelled."""

    def __init__(self, times: int) -> None:
        self.times, self.starts = times, 0
        self.running = asyncio.Event()

    async def __call__(self) -> None:
        self.starts += 1
        if self.starts <= self.times:
            raise RuntimeError(f"killed on purpose ({self.starts})")
        self.running.set()
        await asyncio.Event().wait()


def _sample(metrics: Metrics, name: str, job: str) -> float:
    text = generate_latest(metrics.registry).decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels.get("task") == job:
                return float(sample.value)
    raise AssertionError(f"no {name}{{task={job!r}}} in /metrics")


def test_a_dead_job_is_logged_restarted_with_backoff_and_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> tuple[list[str], Supervisor, Dies, list[str]]:
        dies, restarted = Dies(times=3), []
        supervisor = Supervisor(
            [Job("flaky", dies, needed=True), Job("steady", Dies(times=0))],
            on_restart=restarted.append,
            first_backoff=0.05,
            longest_backoff=0.2,
        )
        supervisor.start()
        await asyncio.sleep(0.01)
        down = supervisor.down()
        await asyncio.wait_for(dies.running.wait(), timeout=5)
        await supervisor.stop()
        return down, supervisor, dies, restarted

    started = time.monotonic()
    down, supervisor, dies, restarted = run(scenario())
    assert down == ["flaky"]  # the needed job, while it waits for its restart
    assert dies.starts == 4 and restarted == ["flaky"] * 3
    assert time.monotonic() - started >= 0.05 + 0.1 + 0.2  # doubling, capped
    assert supervisor.states["flaky"].restarts == 3
    assert "killed on purpose (3)" in supervisor.states["flaky"].last_error
    assert [r for r in caplog.records if "background job flaky died" in r.getMessage()]
    assert all(r.exc_info for r in caplog.records if "died" in r.getMessage())


def test_readyz_fails_while_a_needed_job_is_down_and_metrics_show_it(tmp_path: Path) -> None:
    """Through the app's own lifespan: the template watch (a job the webhook needs) is killed
    on purpose once; /readyz's detail and the metrics say so, then it runs again."""
    _, cert, key = write(issue(["localhost"]), tmp_path)
    tls = ReloadingTLS(cert, key)
    metrics = Metrics()
    dies = Dies(times=1)
    services = Services(
        Settings(),
        PodMutator(AdmissionRules(DEFAULT_POLICY), OfflineTemplateStore()),
        metrics,
        tls,
        background=[Job("template-watch", dies, needed=True)],
    )
    services.background += background_jobs(
        services
    )  # as the builder does: the certificates' reload
    services.lifecycle.listening = True  # as the webhook's server sets it once its port listens

    async def scenario() -> tuple[dict[str, object], float, float, dict[str, object]]:
        async with _lifespan(services, AdmissionLog(True))(None):  # type: ignore[arg-type]
            await asyncio.sleep(0.01)
            while_down = readiness(services, time.time())
            up_while_down = _sample(metrics, "hami_dra_background_up", "template-watch")
            await asyncio.wait_for(dies.running.wait(), timeout=10)  # 1 s backoff
            return (
                while_down,
                up_while_down,
                _sample(metrics, "hami_dra_background_restarts_total", "template-watch"),
                readiness(services, time.time()),
            )

    while_down, up_while_down, restarts, after = run(scenario())
    assert while_down["ready"] is False
    background = while_down["background"]
    assert isinstance(background, dict)
    assert background["template-watch"].startswith("down, restarting: RuntimeError")
    assert background["certificate-reload"] == "running"
    assert up_while_down == 0 and restarts == 1
    assert after["ready"] is True
    assert str(after["background"]["template-watch"]).startswith("running (restarted 1x")  # type: ignore[index]
