"""`hami-dra-webhook serve`: the HTTPS admission webhook."""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import logging
import shutil
import signal
import socket
import tempfile
import typing
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TextIO

from hami_dra_webhook.cli import exit_codes
from hami_dra_webhook.core.policy import PolicyError
from hami_dra_webhook.files.policy_file import read_policy

log = logging.getLogger("hami_dra_webhook.serve")


def add_parser(commands: Any) -> None:
    """Every setting of `Settings` is a flag; its help, choices and default come from there."""
    from hami_dra_webhook.server.settings import Settings, env_name, flag

    parser = commands.add_parser(
        "serve",
        help="run the HTTPS admission webhook",
        description="Run the mutating admission webhook over HTTPS. Every flag also reads from"
        " an environment variable HAMI_DRA_<FLAG> (e.g. HAMI_DRA_PORT); flags win.",
    )
    for name, field in Settings.model_fields.items():
        default = "" if field.default_factory is not None else f"; default {field.default}"
        text = f"{field.description} ({env_name(name)}{default})"
        if field.annotation is bool:
            parser.add_argument(
                flag(name), dest=name, action=argparse.BooleanOptionalAction, help=text
            )
            continue
        choices = typing.get_args(field.annotation)
        literal = typing.get_origin(field.annotation) is typing.Literal
        parser.add_argument(
            flag(name), dest=name, metavar=None if literal else name.upper(),
            choices=choices if literal else None, help=text,
        )  # fmt: skip
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    from pydantic import ValidationError

    from hami_dra_webhook.server.logs import configure
    from hami_dra_webhook.server.settings import Settings, env_name, flag

    given = {
        name: value
        for name in Settings.model_fields
        if (value := getattr(args, name, None)) is not None
    }
    try:
        settings = Settings(**given)
    except ValidationError as error:
        for problem in error.errors():
            field = str(problem["loc"][0]) if problem["loc"] else ""
            where = f"{flag(field)} ({env_name(field)})" if field else "settings"
            message = problem["msg"].removeprefix("Value error, ")
            stderr.write(f"error: {where}: {message}\n")
        return exit_codes.UNREADABLE
    configure(settings.log_level, settings.log_format == "json")
    try:
        loaded = read_policy(str(settings.config) if settings.config else None)
    except PolicyError as error:
        stderr.write(f"error: {error}\n")
        return exit_codes.UNREADABLE
    if loaded.warning:
        log.warning("%s: %s", settings.config, loaded.warning)
    policy = loaded.policy
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            return runner.run(_serve(settings, policy))
    except StartupError as error:
        stderr.write(f"error: {error}\n")
        return exit_codes.UNREADABLE


class StartupError(RuntimeError):
    """Something the operator must fix before the webhook can start."""


def _loop_factory() -> Any:
    if importlib.util.find_spec("uvloop") is not None:
        import uvloop

        return uvloop.new_event_loop
    return None


async def _serve(settings: Any, policy: Any) -> int:
    from hami_dra_webhook.server.metrics import Metrics

    metrics = Metrics()
    cleanup: list[Path] = []

    def remove_then_die(signum: int, _frame: Any) -> None:
        # uvicorn re-raises SIGTERM/SIGINT once it has shut down gracefully, after it has put
        # back the handler it found: this one, so that the temporary key goes first.
        for folder in cleanup:
            shutil.rmtree(folder, ignore_errors=True)
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, remove_then_die)
    try:
        return await _serve_with(settings, policy, metrics, cleanup)
    finally:
        for folder in cleanup:
            shutil.rmtree(folder, ignore_errors=True)


async def _serve_with(settings: Any, policy: Any, metrics: Any, cleanup: list[Path]) -> int:
    from hami_dra_webhook.cluster.template_store import ApiTemplateStore
    from hami_dra_webhook.server import memory
    from hami_dra_webhook.server.app import Parts, create_app
    from hami_dra_webhook.server.connections import ConnectionGuard
    from hami_dra_webhook.server.listening import WebhookServer, guarded_config, limits_of
    from hami_dra_webhook.server.supervisor import Job
    from hami_dra_webhook.server.tls import ReloadingTLS

    api, cluster, store = await _cluster_parts(settings, metrics)
    background: list[Any] = []
    cert_file, key_file = await _certificate_files(settings, api, background, cleanup)
    try:
        tls = ReloadingTLS(
            Path(cert_file), Path(key_file), settings.tls_min_version, settings.client_ca_file
        )
    except (OSError, ValueError) as error:
        raise StartupError(
            f"cannot load the certificate {cert_file} / {key_file}"
            + (f" or the client CA {settings.client_ca_file}" if settings.client_ca_file else "")
            + f": {error}"
        ) from error
    mutator = _mutator(settings, policy, store, cluster)
    if api is None:
        log.warning("no cluster configured: running offline, templates are logged, not created")
    if isinstance(store, ApiTemplateStore):
        background.append(Job("template-watch", store.keep_true, needed=True))
        metrics.watch_template_store(store)
    parts = Parts(
        settings=settings,
        mutator=mutator,
        metrics=metrics,
        tls=tls,
        api=api,
        cluster=cluster,
        background=background,  # the self-managed certificates' renewal, the template watch
    )
    app = create_app(parts)
    guard = ConnectionGuard(limits_of(settings), metrics.rejected, on_closed=memory.trim_soon)
    config = guarded_config(
        app,
        settings.host,
        settings.port,
        guard,
        tls=tls.context,
        keep_alive=30,
        graceful_shutdown=settings.graceful_shutdown,
        lifespan="on",
    )

    def hangup() -> None:
        changed = tls.reload_if_changed()
        log.info("SIGHUP: certificate files %s", "reloaded" if changed else "unchanged")

    server = WebhookServer(config, guard, parts.lifecycle, settings.drain_delay, hangup)
    ops, ops_socket = _ops_server(settings, parts) if settings.ops_port else (None, None)
    guards = {"webhook": guard}
    if ops is not None:
        guards["ops"] = ops.guard
    metrics.watch_connections(guards)
    # Everything imported and built so far lives as long as the process: keep it out of the
    # cyclic collector's way, so that collections triggered by request garbage stay short.
    gc.collect()
    gc.freeze()
    ops_task = None
    if ops is not None:
        ops_task = asyncio.create_task(ops.serve(sockets=[ops_socket]))
    try:
        await server.serve()
    finally:
        if ops is not None and ops_task is not None:
            ops.should_exit = True  # the probes go with the webhook, after it has drained
            await asyncio.gather(ops_task, return_exceptions=True)
        if api is not None:
            await api.close()
        if mutator.off_loop is not None:
            mutator.off_loop.shutdown(wait=False, cancel_futures=True)
    started = server.started and (ops is None or ops.started)
    return exit_codes.OK if started else exit_codes.UNREADABLE


def _mutator(settings: Any, policy: Any, store: Any, cluster: Any) -> Any:
    from hami_dra_webhook.admission.mutator import PodMutator
    from hami_dra_webhook.admission.translation_cache import TranslationCache
    from hami_dra_webhook.cluster.template_store import OfflineTemplateStore

    return PodMutator(
        policy=policy,
        store=store if store is not None else OfflineTemplateStore(),
        cluster=cluster,
        budget=settings.admission_budget,
        cache=TranslationCache(max_bytes=settings.translation_cache_bytes),
        excluded_namespaces=frozenset(
            n.strip() for n in settings.excluded_namespaces.split(",") if n.strip()
        ),
        # One thread: large reviews wait for each other, never for the event loop.
        off_loop=ThreadPoolExecutor(max_workers=1, thread_name_prefix="large-review"),
    )


async def _certificate_files(
    settings: Any, api: Any, background: list[Any], cleanup: list[Path]
) -> tuple[Path, Path]:
    """The serving certificate: given, self-managed in the cluster, or self-signed here."""
    from hami_dra_webhook.certs.pki import issue, write
    from hami_dra_webhook.server.supervisor import Job

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
    return Path(cert_file), Path(key_file)


def _ops_server(settings: Any, parts: Any) -> tuple[Any, socket.socket]:
    """The plain-HTTP operations port: a second uvicorn server on the same loop. It leaves the
    signals to the webhook's server and stops when that one has stopped. Its socket is bound
    here, so that a port in use is a start-up error with a message, not a traceback."""
    from hami_dra_webhook.server.app import create_ops_app
    from hami_dra_webhook.server.connections import ConnectionGuard, ConnectionLimits
    from hami_dra_webhook.server.listening import OpsServer, guarded_config

    # Limits of its own: a flood of the webhook port cannot close the probes' connections.
    guard = ConnectionGuard(
        ConnectionLimits(max_connections=256, max_unproven=64, max_requests=64),
        parts.metrics.rejected,
    )
    config = guarded_config(
        create_ops_app(parts), settings.ops_host, settings.ops_port, guard, keep_alive=5
    )
    try:
        listening = socket.create_server((settings.ops_host, settings.ops_port))
    except OSError as error:
        raise StartupError(
            f"cannot listen on --ops-host {settings.ops_host} --ops-port {settings.ops_port}:"
            f" {error.strerror or error}; choose another port, or 0 for none"
        ) from error
    return OpsServer(config, guard), listening


async def _self_managed(api: Any, settings: Any) -> tuple[Path, Path, Any]:
    """Certificate from the Secret (issued if needed), files written, caBundle published."""
    from hami_dra_webhook.certs.pki import write
    from hami_dra_webhook.certs.self_managed import (
        CertificateSetupError,
        Target,
        ensure_certificates,
        publish_ca_bundle,
    )

    target = Target(
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


async def _cluster_parts(settings: Any, metrics: Any) -> tuple[Any, Any, Any]:
    if settings.kubeconfig is None:
        from hami_dra_webhook.kube.port import in_cluster

        if not in_cluster():
            return None, None, None
    from hami_dra_webhook.cluster.rate import NamespaceRate
    from hami_dra_webhook.cluster.state import ClusterState
    from hami_dra_webhook.cluster.template_store import ApiTemplateStore
    from hami_dra_webhook.kube.client import KubernetesApi, load_configuration

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
