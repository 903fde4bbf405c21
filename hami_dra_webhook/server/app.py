"""The HTTPS app: POST /mutate, /validate-workloads, /mutate-volcano-jobs and /gate-gpu-quota
routed straight to their admission handlers (admission/handler.py); the probes and metrics
(operations.py), 404s and the lifespan, which supervises the background jobs, by FastAPI."""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import FastAPI
from starlette.types import Receive, Scope, Send

from hami_dra_webhook.admission.handler import routes
from hami_dra_webhook.server import memory
from hami_dra_webhook.server.admission_events import ServerEvents
from hami_dra_webhook.server.endpoint import BodyBudget, BodyEndpoint
from hami_dra_webhook.server.logs import AdmissionLog
from hami_dra_webhook.server.operations import add_operations, readiness
from hami_dra_webhook.server.services import Services
from hami_dra_webhook.server.supervisor import Supervisor

_BODY_REJECTIONS = {
    413: "too_large",
    415: "media_type",
    408: "read_timeout",
    503: "bodies_in_flight",
}


def create_app(services: Services) -> Dispatch:
    """The HTTPS app: the POST endpoints answered before any router; the rest (probes,
    metrics, 404s, lifespan) by FastAPI."""
    settings, metrics, mutator = services.settings, services.metrics, services.mutator
    admission_log = AdmissionLog(settings.log_format == "json")
    events = ServerEvents(metrics, admission_log)
    metrics.watch_translation_cache(mutator.cache)
    metrics.watch_readiness(lambda: bool(readiness(services, time.time())["ready"]))
    options: dict[str, Any] = {}
    if "telemetry" in inspect.signature(FastAPI.__init__).parameters:
        # FastAPI's own OpenTelemetry hooks look up providers on every request; we export
        # Prometheus metrics instead.
        options["telemetry"] = {"tracing": False, "metrics": False, "logs": False}
    app = FastAPI(
        title="hami-dra-webhook",
        lifespan=_lifespan(services, admission_log),
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        **options,
    )

    def rejected(status: int) -> None:
        metrics.rejected(_BODY_REJECTIONS.get(status, "read_timeout"))

    limit, timeout = settings.max_body_bytes, settings.request_read_timeout
    budget = BodyBudget(settings.max_bodies_bytes, on_drained=memory.trim_soon)
    posts: dict[str, BodyEndpoint] = {
        path: BodyEndpoint(admission, limit, timeout, rejected, budget)
        for path, admission in routes(mutator, events, services.api).items()
    }
    if settings.bare_endpoint:

        async def bare(body: bytes) -> tuple[int, bytes]:
            return 200, b'{"ok":true}'

        posts["/bare"] = BodyEndpoint(bare, limit, timeout, rejected, budget)
    add_operations(app, services)
    return Dispatch(posts, app)


class Dispatch:
    """The hot path off the framework: a POST to one of `posts` goes straight to its endpoint
    (a dict lookup instead of the router's regex match, middleware stack and request objects:
    about 35 us a request); everything else goes to `fallback`."""

    def __init__(self, posts: dict[str, Any], fallback: Any) -> None:
        self.posts, self.fallback = posts, fallback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            endpoint = self.posts.get(scope["path"])
            if endpoint is not None:
                if scope["method"] == "POST":
                    await endpoint(scope, receive, send)
                    return
                await _method_not_allowed(send)
                return
        await self.fallback(scope, receive, send)


async def _method_not_allowed(send: Send) -> None:
    body = b'{"message":"use POST"}'
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"allow", b"POST"),
    ]
    await send({"type": "http.response.start", "status": 405, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _lifespan(
    services: Services, admission_log: AdmissionLog
) -> Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]]:
    """The app's life: its background jobs under one supervisor; the admission log flushed."""

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        supervisor = Supervisor(
            services.background, on_restart=services.metrics.background_restarted
        )
        services.metrics.watch_background(supervisor)
        services.supervisor = supervisor
        supervisor.start()
        try:
            yield
        finally:
            await supervisor.stop()
            admission_log.flush()

    return lifespan
