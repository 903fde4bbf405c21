"""The operations endpoints: GET /healthz, /livez, /readyz and /metrics, served on the HTTPS
port and on the plain-HTTP operations port (never /mutate there); `readiness` is what /readyz
answers."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import orjson
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from hami_dra_webhook.cluster.templates.store import ApiTemplateStore
from hami_dra_webhook.server.services import Services

JSON = "application/json"


def _json(document: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(document), status_code=status, media_type=JSON)


def create_ops_app(services: Services) -> Starlette:
    """The plain-HTTP operations port: probes and metrics, with a concurrency limit of its own
    (so that a flood on the webhook port cannot fail the kubelet's probes)."""
    app = Starlette()
    add_operations(app, services)
    return app


def add_operations(app: Starlette, services: Services) -> None:
    metrics = services.metrics

    async def healthz(_: Request) -> Response:
        return _json({"status": "ok"})

    async def readyz(_: Request) -> Response:
        detail = readiness(services, time.time())
        return _json(detail, 200 if detail["ready"] else 503)

    async def metrics_endpoint(_: Request) -> Response:
        if services.tls is not None:
            metrics.cert_expiry.set(services.tls.expires_at)
        if services.cluster is not None:
            metrics.observe_cluster(services.cluster)
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    for path, endpoint in (
        ("/healthz", healthz),
        ("/livez", healthz),
        ("/readyz", readyz),
        ("/metrics", metrics_endpoint),
    ):
        app.router.routes.append(Route(path, endpoint, methods=["GET"]))


def readiness(services: Services, now: float) -> dict[str, Any]:
    """What /readyz answers: each part's state and `ready`."""
    detail: dict[str, Any] = {}
    ready = services.tls is not None
    if services.tls is None:
        detail["certificates"] = "missing"
    elif services.tls.check_expiry(now):  # the one test of expiry (it also logs it, once)
        expired = datetime.fromtimestamp(services.tls.expires_at, UTC).isoformat()
        detail["certificates"] = f"expired at {expired}: kube-apiserver refuses this webhook"
        ready = False
    else:
        detail["certificates"] = "loaded"
    if services.api is None:
        detail["cluster"] = "offline (no kubeconfig, not in a cluster)"
    elif services.cluster is not None:
        detail["cluster"] = "answered" if services.cluster.api_answered else "not answered yet"
        detail["consumableCapacity"] = services.cluster.capacity
        if services.cluster.last_error:
            detail["lastError"] = services.cluster.last_error
        ready = ready and services.cluster.api_answered
    if isinstance(services.mutator.store, ApiTemplateStore):
        detail["templateWatch"] = services.mutator.store.watch.watch_state
    if services.supervisor is not None:
        detail["background"] = services.supervisor.detail()
        ready = ready and not services.supervisor.down()
    if not services.lifecycle.listening:
        detail["webhookPort"] = "not listening yet"
        ready = False
    if services.lifecycle.draining:
        detail["shutdown"] = "shutting down: draining before the listener closes"
        ready = False
    detail["ready"] = ready
    return detail
