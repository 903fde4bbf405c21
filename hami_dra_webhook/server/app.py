"""The FastAPI app: POST /mutate, GET /healthz, /readyz, /metrics."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import orjson
from fastapi import FastAPI, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.routing import Route

from hami_dra_webhook.admission.mutator import MutationRecord, PodMutator, internal_error
from hami_dra_webhook.cluster.gc import collect_garbage
from hami_dra_webhook.cluster.state import ClusterState
from hami_dra_webhook.core import review
from hami_dra_webhook.kube.port import KubeApi
from hami_dra_webhook.server.endpoint import BodyEndpoint, message
from hami_dra_webhook.server.logs import AdmissionLog
from hami_dra_webhook.server.metrics import Metrics
from hami_dra_webhook.server.settings import Settings
from hami_dra_webhook.server.tls import ReloadingTLS

log = logging.getLogger("hami_dra_webhook.server")
JSON = "application/json"


@dataclass
class Parts:
    """Everything the app uses, built by the `serve` command (or by a test)."""

    settings: Settings
    mutator: PodMutator
    metrics: Metrics
    tls: ReloadingTLS | None = None
    api: KubeApi | None = None
    cluster: ClusterState | None = None
    background: list[Callable[[], Coroutine[Any, Any, None]]] = field(default_factory=list)


def _json(document: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(document), status_code=status, media_type=JSON)


def create_app(parts: Parts) -> FastAPI:
    settings, metrics = parts.settings, parts.metrics
    admission_log = AdmissionLog(settings.log_format == "json")

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        tasks = [asyncio.create_task(job()) for job in _jobs(parts)]
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            admission_log.flush()

    options: dict[str, Any] = {}
    if "telemetry" in inspect.signature(FastAPI.__init__).parameters:
        # FastAPI's own OpenTelemetry hooks look up providers on every request; we export
        # Prometheus metrics instead.
        options["telemetry"] = {"tracing": False, "metrics": False, "logs": False}
    app = FastAPI(
        title="hami-dra-webhook",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        **options,
    )

    async def mutate(body: bytes) -> tuple[int, bytes]:
        started = time.perf_counter()
        try:
            request = review.parse_review(body).request
        except review.MalformedReview as error:
            metrics.admissions.labels("unknown", "malformed").inc()
            return message(400, str(error))
        try:
            result = await parts.mutator.mutate(request)
        except Exception:
            log.exception("admission %s failed unexpectedly", request.uid)
            result = internal_error(request)
        _record(metrics, admission_log, result, time.perf_counter() - started)
        return 200, orjson.dumps(result.answer)

    def rejected() -> None:
        metrics.admissions.labels("unknown", "malformed").inc()

    limit, timeout = settings.max_body_bytes, settings.request_read_timeout
    app.router.routes.append(
        Route("/mutate", BodyEndpoint(mutate, limit, timeout, rejected), methods=["POST"])
    )
    if settings.bare_endpoint:

        async def bare(body: bytes) -> tuple[int, bytes]:
            return 200, b'{"ok":true}'

        app.router.routes.append(
            Route("/bare", BodyEndpoint(bare, limit, timeout, rejected), methods=["POST"])
        )

    @app.get("/healthz")
    async def healthz() -> Response:
        return _json({"status": "ok"})

    @app.get("/readyz")
    async def readyz() -> Response:
        detail = _readiness(parts)
        return _json(detail, 200 if detail["ready"] else 503)

    @app.get("/metrics")
    async def metrics_endpoint() -> Response:
        if parts.tls is not None:
            metrics.cert_expiry.set(parts.tls.expires_at)
        if parts.cluster is not None:
            metrics.observe_cluster(parts.cluster)
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return app


def _record(metrics: Metrics, log_: AdmissionLog, result: MutationRecord, elapsed: float) -> None:
    metrics.admitted(result.operation, result.outcome, elapsed, result.resources)
    if result.operation in ("CREATE", "UPDATE"):
        log_.write(
            {
                "namespace": result.namespace,
                "pod": result.name,
                "operation": result.operation,
                "outcome": result.outcome,
                "templates": result.templates,
                "duration_ms": round(elapsed * 1000, 3),
            }
        )


def _readiness(parts: Parts) -> dict[str, Any]:
    certificates = parts.tls is not None
    detail: dict[str, Any] = {"certificates": "loaded" if certificates else "missing"}
    ready = certificates
    if parts.api is None:
        detail["cluster"] = "offline (no kubeconfig, not in a cluster)"
    elif parts.cluster is not None:
        detail["cluster"] = "answered" if parts.cluster.api_answered else "not answered yet"
        detail["consumableCapacity"] = parts.cluster.capacity
        if parts.cluster.last_error:
            detail["lastError"] = parts.cluster.last_error
        ready = ready and parts.cluster.api_answered
    detail["ready"] = ready
    return detail


def _jobs(parts: Parts) -> list[Callable[[], Coroutine[Any, Any, None]]]:
    settings = parts.settings
    jobs = list(parts.background)
    if parts.tls is not None:
        tls = parts.tls
        jobs.append(lambda: tls.watch(settings.cert_reload_interval))
    api, cluster = parts.api, parts.cluster
    if api is not None and cluster is not None:
        policy = parts.mutator.policy

        async def check_cluster() -> None:
            while True:
                await cluster.refresh(api, policy, settings.probe_namespace, timeout=10.0)
                parts.metrics.observe_cluster(cluster)
                for status in cluster.failed_checks:
                    parts.metrics.api_error(status)
                cluster.failed_checks.clear()
                await asyncio.sleep(settings.cluster_check_interval)

        jobs.append(check_cluster)
        if settings.gc_interval > 0:

            async def gc_loop() -> None:
                while True:
                    await asyncio.sleep(settings.gc_interval)
                    try:
                        report = await collect_garbage(
                            api, now=time.time(), grace=settings.gc_grace
                        )
                    except Exception:
                        log.exception("template garbage collection failed; retrying later")
                        continue
                    parts.metrics.gc_deleted.inc(len(report.deleted))
                    log.info("template garbage collection: %s", report.summary())

            jobs.append(gc_loop)
    return jobs
