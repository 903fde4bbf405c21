"""The apps: HTTPS (POST /mutate, and the probes and metrics) and plain HTTP for operations
(GET /healthz, /livez, /readyz, /metrics only: never /mutate)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
from fastapi import FastAPI
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from hami_dra_webhook.admission.mutator import MutationRecord, PodMutator, internal_error
from hami_dra_webhook.admission.volcano import mutate_volcano_job
from hami_dra_webhook.admission.workloads import WorkloadPreview, allowed
from hami_dra_webhook.cluster.gc import KnownForeign, collect_garbage
from hami_dra_webhook.cluster.state import ClusterState
from hami_dra_webhook.cluster.template_store import ApiTemplateStore
from hami_dra_webhook.core import review
from hami_dra_webhook.core.review_fast import read_review
from hami_dra_webhook.kube.port import KubeApi
from hami_dra_webhook.server import memory
from hami_dra_webhook.server.endpoint import BodyBudget, BodyEndpoint, message
from hami_dra_webhook.server.listening import Lifecycle
from hami_dra_webhook.server.logs import AdmissionLog
from hami_dra_webhook.server.metrics import Metrics
from hami_dra_webhook.server.settings import Settings
from hami_dra_webhook.server.supervisor import Job, Supervisor
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
    lifecycle: Lifecycle = field(default_factory=Lifecycle)
    # The template watch and the self-managed certificates' renewal (the app adds the
    # certificate files' reload, the cluster check and the garbage collection).
    background: list[Job] = field(default_factory=list)
    supervisor: Supervisor | None = None  # set while the app runs


def _json(document: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(document), status_code=status, media_type=JSON)


# A review over this is decoded on the mutator's `off_loop` thread; one whose pod has many
# containers (PodMutator.many_containers: 2,000 took 100 ms) is translated and encoded there:
# the event loop then gets the interpreter back every switch interval (5 ms) (a 4.3 MB review
# of 40,000 containers held the loop 0.6 s). What stays whole is the decode: orjson holds the
# interpreter throughout (measured: up to ~90 ms for 5 MB of 40,000 containers).
OFF_LOOP_BYTES = 256 * 1024


def create_app(parts: Parts) -> Dispatch:
    """The HTTPS app: POST /mutate (and /bare) answered before any router; the rest (probes,
    metrics, 404s, lifespan) by FastAPI."""
    settings, metrics = parts.settings, parts.metrics
    admission_log = AdmissionLog(settings.log_format == "json")
    metrics.watch_translation_cache(parts.mutator.cache)
    metrics.watch_readiness(lambda: bool(readiness(parts, time.time())["ready"]))

    lifespan = _lifespan(parts, admission_log)

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
        off_loop = parts.mutator.off_loop
        try:
            if off_loop is not None and len(body) > OFF_LOOP_BYTES:
                request, fast = await asyncio.get_running_loop().run_in_executor(
                    off_loop, read_review, body
                )
            else:
                request, fast = read_review(body)
        except review.MalformedReview as error:
            metrics.rejected("malformed")
            return message(400, str(error))
        large = parts.mutator.many_containers(request, fast)
        result = await _admitted(
            parts,
            admission_log,
            request,
            parts.mutator.mutate(request, off_loop=large, fast=fast),
            started,
        )
        if large:
            answer = await asyncio.get_running_loop().run_in_executor(
                parts.mutator.off_loop, orjson.dumps, result.answer
            )
            return 200, answer
        return 200, orjson.dumps(result.answer)

    def rejected(status: int) -> None:
        metrics.rejected(_BODY_REJECTIONS.get(status, "read_timeout"))

    limit, timeout = settings.max_body_bytes, settings.request_read_timeout
    budget = BodyBudget(settings.max_bodies_bytes, on_drained=memory.trim_soon)
    posts: dict[str, Any] = {
        "/mutate": BodyEndpoint(mutate, limit, timeout, rejected, budget),
        "/validate-workloads": BodyEndpoint(
            _validate_workloads(parts), limit, timeout, rejected, budget
        ),
        "/mutate-volcano-jobs": BodyEndpoint(
            _mutate_volcano_jobs(parts, admission_log), limit, timeout, rejected, budget
        ),
    }
    if settings.bare_endpoint:

        async def bare(body: bytes) -> tuple[int, bytes]:
            return 200, b'{"ok":true}'

        posts["/bare"] = BodyEndpoint(bare, limit, timeout, rejected, budget)

    _add_operations(app, parts)
    return Dispatch(posts, app)


def _validate_workloads(parts: Parts) -> Callable[[bytes], Awaitable[tuple[int, bytes]]]:
    """POST /validate-workloads: what the pods of an applied workload will become, as warnings
    (admission/workloads.py). It never denies: a failure here answers `allowed`, no warnings."""
    metrics = parts.metrics
    scope = parts.settings.migration_scope
    preview = WorkloadPreview(parts.mutator, opted_in_only=scope == "workloads")

    async def validate(body: bytes) -> tuple[int, bytes]:
        off_loop = parts.mutator.off_loop
        if off_loop is not None and len(body) > OFF_LOOP_BYTES:  # a large custom resource
            status, answer, outcome = await asyncio.get_running_loop().run_in_executor(
                off_loop, functools.partial(judge, body, cached=False)
            )
        else:
            status, answer, outcome = judge(body, cached=True)
        if outcome is None:
            metrics.rejected("malformed")
        else:
            metrics.workload_previews.labels(outcome).inc()
        return status, answer

    def judge(body: bytes, cached: bool) -> tuple[int, bytes, str | None]:
        """Decode and judge; (status, answer, outcome), outcome None for a malformed body."""
        try:
            request = review.parse_review(body).request
        except review.MalformedReview as error:
            return (*message(400, str(error)), None)
        try:
            answered = preview.answer(request, cached=cached)
        except Exception:
            log.exception("workload preview %s failed unexpectedly", request.uid)
            return 200, orjson.dumps(allowed(request.uid)), "none"
        return 200, orjson.dumps(answered.answer), answered.outcome

    return validate


async def _admitted(
    parts: Parts,
    admission_log: AdmissionLog,
    request: Any,
    work: Awaitable[MutationRecord],
    started: float,
) -> MutationRecord:
    """Run one admission's use case, counted in flight; an unexpected failure is logged and
    answered as an internal error; the result is recorded and logged."""
    parts.metrics.in_flight.inc()
    try:
        result = await work
    except Exception:
        log.exception("admission %s failed unexpectedly", request.uid)
        result = internal_error(request)
    finally:
        parts.metrics.in_flight.dec()
    _record(parts.metrics, admission_log, result, time.perf_counter() - started)
    return result


def _mutate_volcano_jobs(
    parts: Parts, admission_log: AdmissionLog
) -> Callable[[bytes], Awaitable[tuple[int, bytes]]]:
    """POST /mutate-volcano-jobs: a Volcano Job's task templates converted at its admission
    (admission/volcano.py), recorded and logged as a pod's admission is."""
    metrics = parts.metrics

    async def mutate(body: bytes) -> tuple[int, bytes]:
        started = time.perf_counter()
        try:
            request = review.parse_review(body).request
        except review.MalformedReview as error:
            metrics.rejected("malformed")
            return message(400, str(error))
        work = mutate_volcano_job(parts.mutator, request)
        result = await _admitted(parts, admission_log, request, work, started)
        return 200, orjson.dumps(result.answer)

    return mutate


_BODY_REJECTIONS = {413: "too_large", 408: "read_timeout", 503: "bodies_in_flight"}


class Dispatch:
    """The hot path off the framework: a POST to one of `posts` goes straight to its endpoint
    (a dict lookup instead of the router's regex match, middleware stack and request objects:
    about 35 us a request); everything else goes to `fallback`."""

    def __init__(self, posts: dict[str, Any], fallback: Any) -> None:
        self.posts, self.fallback = posts, fallback

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            endpoint = self.posts.get(scope["path"])
            if endpoint is not None:
                if scope["method"] == "POST":
                    await endpoint(scope, receive, send)
                    return
                await _method_not_allowed(send)
                return
        await self.fallback(scope, receive, send)


async def _method_not_allowed(send: Any) -> None:
    body = b'{"message":"use POST"}'
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"allow", b"POST"),
    ]
    await send({"type": "http.response.start", "status": 405, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def create_ops_app(parts: Parts) -> Starlette:
    """The plain-HTTP operations port: probes and metrics, with a concurrency limit of its own
    (so that a flood on the webhook port cannot fail the kubelet's probes)."""
    app = Starlette()
    _add_operations(app, parts)
    return app


def _add_operations(app: Starlette, parts: Parts) -> None:
    metrics = parts.metrics

    async def healthz(_: Request) -> Response:
        return _json({"status": "ok"})

    async def readyz(_: Request) -> Response:
        detail = readiness(parts, time.time())
        return _json(detail, 200 if detail["ready"] else 503)

    async def metrics_endpoint(_: Request) -> Response:
        if parts.tls is not None:
            metrics.cert_expiry.set(parts.tls.expires_at)
        if parts.cluster is not None:
            metrics.observe_cluster(parts.cluster)
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    for path, endpoint in (
        ("/healthz", healthz),
        ("/livez", healthz),
        ("/readyz", readyz),
        ("/metrics", metrics_endpoint),
    ):
        app.router.routes.append(Route(path, endpoint, methods=["GET"]))


def _record(metrics: Metrics, log_: AdmissionLog, result: MutationRecord, elapsed: float) -> None:
    metrics.admitted(result.operation, result.outcome, elapsed, result.resources)
    if result.operation in ("CREATE", "UPDATE"):
        line = {
            "uid": result.uid,
            "user": result.user,
            "resource": result.resource,
            "namespace": result.namespace,
            "pod": result.name,
            "operation": result.operation,
            "dryRun": result.dry_run,
            "outcome": result.outcome,
            "templates": result.templates,
            "duration_ms": round(elapsed * 1000, 3),
        }
        if result.message:  # a refusal: why, as the pod's creator was told
            line |= {"reason": result.reason, "message": result.message}
        log_.write(line)


def readiness(parts: Parts, now: float) -> dict[str, Any]:
    """What /readyz answers: each part's state and `ready`."""
    detail: dict[str, Any] = {}
    ready = parts.tls is not None
    if parts.tls is None:
        detail["certificates"] = "missing"
    elif parts.tls.check_expiry(now):  # the one test of expiry (it also logs it, once)
        expired = datetime.fromtimestamp(parts.tls.expires_at, UTC).isoformat()
        detail["certificates"] = f"expired at {expired}: kube-apiserver refuses this webhook"
        ready = False
    else:
        detail["certificates"] = "loaded"
    if parts.api is None:
        detail["cluster"] = "offline (no kubeconfig, not in a cluster)"
    elif parts.cluster is not None:
        detail["cluster"] = "answered" if parts.cluster.api_answered else "not answered yet"
        detail["consumableCapacity"] = parts.cluster.capacity
        if parts.cluster.last_error:
            detail["lastError"] = parts.cluster.last_error
        ready = ready and parts.cluster.api_answered
    if isinstance(parts.mutator.store, ApiTemplateStore):
        detail["templateWatch"] = parts.mutator.store.watch.watch_state
    if parts.supervisor is not None:
        detail["background"] = parts.supervisor.detail()
        ready = ready and not parts.supervisor.down()
    if not parts.lifecycle.listening:
        detail["webhookPort"] = "not listening yet"
        ready = False
    if parts.lifecycle.draining:
        detail["shutdown"] = "shutting down: draining before the listener closes"
        ready = False
    detail["ready"] = ready
    return detail


def _lifespan(
    parts: Parts, admission_log: AdmissionLog
) -> Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]]:
    """The app's life: its background jobs under one supervisor; the admission log flushed."""

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        supervisor = Supervisor(_jobs(parts), on_restart=parts.metrics.background_restarted)
        parts.metrics.watch_background(supervisor)
        parts.supervisor = supervisor
        supervisor.start()
        try:
            yield
        finally:
            await supervisor.stop()
            admission_log.flush()

    return lifespan


def _jobs(parts: Parts) -> list[Job]:
    settings = parts.settings
    jobs = list(parts.background)
    if parts.tls is not None:
        tls = parts.tls
        reload = functools.partial(tls.watch, settings.cert_reload_interval)
        jobs.append(Job("certificate-reload", reload, needed=True))
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

        jobs.append(Job("cluster-check", check_cluster))
        if settings.gc_interval > 0:
            known_foreign = KnownForeign()  # across passes: tenants' objects read once

            async def gc_loop() -> None:
                while True:
                    await asyncio.sleep(settings.gc_interval)
                    try:
                        report = await collect_garbage(
                            api,
                            now=time.time(),
                            grace=settings.gc_grace,
                            known_foreign=known_foreign,
                        )
                    except Exception:
                        log.exception("template garbage collection failed; retrying later")
                        continue
                    parts.metrics.gc_deleted.inc(len(report.deleted))
                    log.info("template garbage collection: %s", report.summary())

            jobs.append(Job("template-gc", gc_loop))
    return jobs
