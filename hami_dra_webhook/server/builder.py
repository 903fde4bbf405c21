"""The composition root of `serve`: the webhook's parts built from its Settings and Policy,
typed, in the server layer, so that a test can build and run the whole server without the
command line (cert-manager's internal/webhook is the model). The CLI parses, configures logging
and calls `build_server`, then `WebhookProcess.run`."""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
import tempfile
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hami_dra_webhook.admission.admitted import AdmissionRules
from hami_dra_webhook.admission.mutator import PodMutator
from hami_dra_webhook.certs.pki import issue, write
from hami_dra_webhook.certs.self_managed import (
    CertificateSetupError,
    CertificateTarget,
    ensure_certificates,
    publish_ca_bundle,
)
from hami_dra_webhook.cluster.quota.view import QuotaView
from hami_dra_webhook.cluster.state import ClusterState
from hami_dra_webhook.cluster.templates.rate import NamespaceRate
from hami_dra_webhook.cluster.templates.store import (
    ApiTemplateStore,
    OfflineTemplateStore,
    TemplateStore,
)
from hami_dra_webhook.core.migration.pools import Scope
from hami_dra_webhook.core.quota.gpu_quota import quota_keys
from hami_dra_webhook.core.review.translation_cache import TranslationCache
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.kube.port import in_cluster
from hami_dra_webhook.server import memory
from hami_dra_webhook.server.app import create_app
from hami_dra_webhook.server.connections import ConnectionGuard, ConnectionLimits
from hami_dra_webhook.server.jobs import background_jobs
from hami_dra_webhook.server.listening import (
    OpsServer,
    WebhookServer,
    guarded_config,
    limits_of,
)
from hami_dra_webhook.server.metrics import Metrics
from hami_dra_webhook.server.operations import create_ops_app
from hami_dra_webhook.server.services import Services
from hami_dra_webhook.server.settings import Settings
from hami_dra_webhook.server.supervisor import Job
from hami_dra_webhook.server.tls import ReloadingTLS

if TYPE_CHECKING:  # the client library costs ~40 MiB: imported only with a cluster to talk to
    from hami_dra_webhook.kube.client import KubernetesApi

log = logging.getLogger("hami_dra_webhook.serve")
BackgroundJob = Callable[[], Coroutine[Any, Any, None]]


class StartupError(RuntimeError):
    """Something the operator must fix before the webhook can start."""


@dataclass
class WebhookProcess:
    """Everything `serve` runs: the HTTPS server, the operations server (with its bound socket),
    and what must be closed after them."""

    services: Services
    server: WebhookServer
    ops: OpsServer | None
    ops_socket: socket.socket | None
    api: KubernetesApi | None

    async def run(self) -> bool:
        """Serve until stopped; whether both servers had started (else they could not listen)."""
        ops_task = None
        if self.ops is not None and self.ops_socket is not None:
            ops_task = asyncio.create_task(self.ops.serve(sockets=[self.ops_socket]))
        try:
            await self.server.serve()
        finally:
            if self.ops is not None and ops_task is not None:
                self.ops.should_exit = True  # the probes go with the webhook, after it drained
                await asyncio.gather(ops_task, return_exceptions=True)
            if self.api is not None:
                await self.api.close()
            if self.services.mutator.off_loop is not None:
                self.services.mutator.off_loop.shutdown(wait=False, cancel_futures=True)
        return self.server.started and (self.ops is None or self.ops.started)


async def build_server(
    settings: Settings, policy: Policy, cleanup: list[Path], metrics: Metrics | None = None
) -> WebhookProcess:
    """The webhook built from `settings` and `policy`; folders to remove at exit go to
    `cleanup` (a self-signed key in /tmp)."""
    memory.one_heap()  # before any thread of the server starts (memory.py says why)
    metrics = metrics or Metrics()
    api, cluster, store = await _cluster_services(settings, metrics)
    background: list[Job] = []
    cert_file, key_file = await _certificate_files(settings, api, background, cleanup)
    tls = _tls(settings, cert_file, key_file)
    mutator = _mutator(settings, policy, store, cluster)
    if api is not None and settings.gpu_quota:
        mutator.quotas = QuotaView(api, quota_keys(policy))
    if api is None:
        log.warning("no cluster configured: running offline, templates are logged, not created")
    if isinstance(store, ApiTemplateStore):
        metrics.watch_template_store(store)
    services = Services(
        settings=settings,
        mutator=mutator,
        metrics=metrics,
        tls=tls,
        api=api,
        cluster=cluster,
        background=background,  # the self-managed certificates' renewal
    )
    services.background += background_jobs(services)
    guard = ConnectionGuard(limits_of(settings), metrics.rejected, on_closed=memory.trim_soon)
    config = guarded_config(
        create_app(services),
        settings.host,
        settings.port,
        guard,
        tls=tls.context,
        keep_alive=settings.idle_timeout,
        graceful_shutdown=settings.graceful_shutdown,
        lifespan="on",
    )

    def hangup() -> None:
        changed = tls.reload_if_changed()
        log.info("SIGHUP: certificate files %s", "reloaded" if changed else "unchanged")

    server = WebhookServer(config, guard, services.lifecycle, settings.drain_delay, hangup)
    ops, ops_socket = _ops_server(settings, services) if settings.ops_port else (None, None)
    guards = {"webhook": guard}
    if ops is not None:
        guards["ops"] = ops.guard
    metrics.watch_connections(guards)
    # Everything imported and built so far lives as long as the process: keep it out of the
    # cyclic collector's way, so that collections triggered by request garbage stay short.
    gc.collect()
    gc.freeze()
    return WebhookProcess(services, server, ops, ops_socket, api)


def _tls(settings: Settings, cert_file: str | Path, key_file: str | Path) -> ReloadingTLS:
    try:
        return ReloadingTLS(
            Path(cert_file), Path(key_file), settings.tls_min_version, settings.client_ca_file
        )
    except (OSError, ValueError) as error:
        raise StartupError(
            f"cannot load the certificate {cert_file} / {key_file}"
            + (f" or the client CA {settings.client_ca_file}" if settings.client_ca_file else "")
            + f": {error}"
        ) from error


def _mutator(
    settings: Settings, policy: Policy, store: TemplateStore | None, cluster: ClusterState | None
) -> PodMutator:
    rules = AdmissionRules(
        policy=policy,
        excluded_namespaces=_names(settings.excluded_namespaces),
        volcano_schedulers=(
            _names(settings.volcano_schedulers)
            if settings.volcano_jobs == "convert"
            else frozenset()
        ),
        scope=Scope(settings.migration_scope),
    )
    return PodMutator(
        rules=rules,
        store=store if store is not None else OfflineTemplateStore(),
        cluster=cluster,
        budget=settings.admission_budget,
        cache=TranslationCache(max_bytes=settings.translation_cache_bytes),
        # One thread: large reviews wait for each other, never for the event loop.
        off_loop=ThreadPoolExecutor(max_workers=1, thread_name_prefix="large-review"),
    )


def _names(listed: str) -> frozenset[str]:
    return frozenset(n.strip() for n in listed.split(",") if n.strip())


async def _certificate_files(
    settings: Settings,
    api: KubernetesApi | None,
    background: list[Job],
    cleanup: list[Path],
) -> tuple[Path, Path]:
    """The serving certificate: given, self-managed in the cluster, or self-signed here."""
    cert_file, key_file = settings.cert_file, settings.key_file
    if settings.self_managed_certs:
        if api is None:
            raise StartupError(
                "--self-managed-certs needs cluster access (in-cluster or --kubeconfig)"
            )
        cert_file, key_file, job = await _self_managed(api, settings)
        background.append(Job("certificate-renewal", job))
    elif cert_file is None:
        if settings.self_signed_dir is not None:
            folder = settings.self_signed_dir
        else:
            folder = Path(tempfile.mkdtemp(prefix="hami-dra-webhook-"))
            cleanup.append(folder)  # a private key: not left behind in /tmp
        _, cert_file, key_file = write(issue(["localhost", "127.0.0.1", "::1"]), folder)
        log.info(
            "no --cert-file: serving a self-signed certificate for localhost; its CA is %s",
            folder / "ca.crt",
            extra={"ca_file": str(folder / "ca.crt")},
        )
    assert key_file is not None  # Settings requires the two files together
    return Path(cert_file), Path(key_file)


def _ops_server(settings: Settings, services: Services) -> tuple[OpsServer, socket.socket]:
    """The plain-HTTP operations port: a second uvicorn server on the same loop. It leaves the
    signals to the webhook's server and stops when that one has stopped. Its socket is bound
    here, so that a port in use is a start-up error with a message, not a traceback."""
    # Limits of its own: a flood of the webhook port cannot close the probes' connections.
    guard = ConnectionGuard(
        ConnectionLimits(
            max_connections=settings.ops_max_connections,
            max_unproven=max(1, settings.ops_max_connections // 4),
            max_requests=max(1, settings.ops_max_connections // 4),
        ),
        services.metrics.rejected,
    )
    config = guarded_config(
        create_ops_app(services),
        settings.ops_host,
        settings.ops_port,
        guard,
        keep_alive=settings.ops_idle_timeout,
    )
    try:
        listening = socket.create_server((settings.ops_host, settings.ops_port))
    except OSError as error:
        raise StartupError(
            f"cannot listen on --ops-host {settings.ops_host} --ops-port {settings.ops_port}:"
            f" {error.strerror or error}; choose another port, or 0 for none"
        ) from error
    return OpsServer(config, guard), listening


async def _self_managed(api: KubernetesApi, settings: Settings) -> tuple[Path, Path, BackgroundJob]:
    """Certificate from the Secret (issued if needed), files written, caBundle published."""
    target = CertificateTarget(
        namespace=settings.probe_namespace,
        secret=settings.cert_secret,
        service=settings.service_name,
        webhook_configuration=settings.webhook_config,
        extra_hosts=tuple(h.strip() for h in settings.cert_hosts.split(",") if h.strip()),
    )

    async def refresh() -> tuple[Path, Path]:
        bundle = await ensure_certificates(api, target)
        await publish_ca_bundle(api, target, bundle.ca_pem)
        cert_path = settings.cert_dir / "tls.crt"
        if not cert_path.exists() or cert_path.read_bytes() != bundle.cert_pem:
            write(bundle, settings.cert_dir)  # ReloadingTLS notices the change
        return cert_path, settings.cert_dir / "tls.key"

    try:
        cert_file, key_file = await refresh()
    except CertificateSetupError as error:
        raise StartupError(str(error)) from error

    async def keep_fresh() -> None:
        while True:
            await asyncio.sleep(settings.cert_check_interval)
            try:
                await refresh()
            except CertificateSetupError as error:
                log.error("self-managed certificate check failed: %s", error)

    return cert_file, key_file, keep_fresh


async def _cluster_services(
    settings: Settings, metrics: Metrics
) -> tuple[KubernetesApi | None, ClusterState | None, ApiTemplateStore | None]:
    if settings.kubeconfig is None and not in_cluster():
        return None, None, None
    from hami_dra_webhook.kube.client import KubernetesApi
    from hami_dra_webhook.kube.connect import load_configuration

    try:
        configuration = await load_configuration(
            str(settings.kubeconfig) if settings.kubeconfig else None
        )
    except Exception as error:  # the client raises many kinds for a bad kubeconfig
        raise StartupError(
            f"cannot load cluster access ({settings.kubeconfig}): {error}"
        ) from error
    if configuration is None:
        return None, None, None
    api = KubernetesApi(configuration)
    store = ApiTemplateStore(
        api,
        cache_ttl=settings.cache_ttl,
        events=metrics,
        rate=NamespaceRate(settings.template_rate, settings.template_burst),
    )
    return api, ClusterState(), store
