"""Every background job of the webhook, built in one place for the Supervisor (supervisor.py),
which alone restarts, counts and reports them: the certificate files' reload, the template
watch, the cluster check and the template garbage collection (the self-managed certificates'
renewal is built with the certificates, in builder.py)."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import socket
import time

from hami_dra_webhook.cluster.quota.lease import Lease
from hami_dra_webhook.cluster.quota.view import QuotaView
from hami_dra_webhook.cluster.quota.work import QuotaGate
from hami_dra_webhook.cluster.state import ClusterState
from hami_dra_webhook.cluster.templates.gc import KnownForeign, collect_garbage
from hami_dra_webhook.cluster.templates.store import ApiTemplateStore
from hami_dra_webhook.kube.port import KubeApi
from hami_dra_webhook.server.services import Services
from hami_dra_webhook.server.supervisor import Job

log = logging.getLogger("hami_dra_webhook.server")


def background_jobs(services: Services) -> list[Job]:
    """The jobs `services` need, beside those already in `services.background`."""
    settings = services.settings
    jobs = []
    if services.tls is not None:
        reload = functools.partial(services.tls.watch, settings.cert_reload_interval)
        jobs.append(Job("certificate-reload", reload, needed=True))
    store = services.mutator.store
    if isinstance(store, ApiTemplateStore):
        # Not needed for readiness: without the watch the cache is not used and every
        # admission confirms its templates through the API (cluster/templates/store.py).
        jobs.append(Job("template-watch", store.watch.run))
    api, cluster = services.api, services.cluster
    if api is not None and cluster is not None:
        jobs.append(Job("cluster-check", functools.partial(_check_cluster, services, api, cluster)))
        quotas = services.mutator.quotas
        if settings.gpu_quota and quotas is not None:
            # The view decides the gate at admission (a read of the namespace's quotas
            # stands in while it is down); the work releases held pods, one replica at a time.
            jobs.append(Job("gpu-quota-view", quotas.run))
            jobs.append(Job("gpu-quota", quota_gate(services, api, quotas).run))
        if settings.gc_interval > 0:
            known_foreign = KnownForeign()  # across passes: tenants' objects read once
            gc = functools.partial(_collect_garbage, services, api, known_foreign)
            jobs.append(Job("template-gc", gc))
    return jobs


def quota_gate(services: Services, api: KubeApi, quotas: QuotaView) -> QuotaGate:
    """The work that releases held GPU pods as their namespace's quota allows, one replica at
    a time (the Lease)."""
    settings = services.settings
    identity = f"{os.environ.get('POD_NAME') or socket.gethostname()}-{os.getpid()}"
    lease = Lease(api, settings.probe_namespace, settings.gpu_quota_lease, identity)
    return QuotaGate(
        api,
        services.mutator.policy_now,
        lease,
        quotas,
        interval=settings.gpu_quota_interval,
        observe=services.metrics.observe_quota,
    )


async def _check_cluster(services: Services, api: KubeApi, cluster: ClusterState) -> None:
    metrics, policy, settings = services.metrics, services.mutator.policy, services.settings
    while True:
        await cluster.refresh(
            api, policy, settings.probe_namespace, timeout=settings.cluster_check_timeout
        )
        metrics.observe_cluster(cluster)
        for status in cluster.failed_checks:
            metrics.api_error(status)
        cluster.failed_checks.clear()
        await asyncio.sleep(settings.cluster_check_interval)


async def _collect_garbage(services: Services, api: KubeApi, known_foreign: KnownForeign) -> None:
    """A pass every gc_interval; a pass that fails raises, and the Supervisor restarts the job
    (after its backoff, then gc_interval again), logging and counting the failure."""
    settings = services.settings
    while True:
        await asyncio.sleep(settings.gc_interval)
        report = await collect_garbage(
            api, now=time.time(), grace=settings.gc_grace, known_foreign=known_foreign
        )
        services.metrics.gc_deleted.inc(len(report.deleted))
        log.info("template garbage collection: %s", report.summary())
