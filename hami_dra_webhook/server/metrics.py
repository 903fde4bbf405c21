"""Prometheus metrics, on a registry of the app's own (so that tests can build many apps).

Labels come from fixed sets only (an operation kube-apiserver does not send counts as `other`),
so no caller can grow the registry. No `_created` series: counters expose `_total` only."""

from __future__ import annotations

import platform
from collections.abc import Callable
from typing import Any

import prometheus_client
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from hami_dra_webhook import __version__
from hami_dra_webhook.cluster.state import ClusterState
from hami_dra_webhook.server.fleet_metrics import FleetMetrics

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
CAPACITY_VALUES = {"unknown": -1, "dropped": 0, "effective": 1}
OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})
# What the HTTP layer refuses or closes before an admission starts (server/connections.py).
REJECTIONS = (
    "malformed",  # 400: not an AdmissionReview
    "media_type",  # 415: a body that is not application/json
    "too_large",  # 413: a body over --max-body-bytes
    "read_timeout",  # 408: a body slower than --request-read-timeout
    "bodies_in_flight",  # 503: bodies together over --max-bodies-bytes
    "busy",  # 503: --max-concurrency requests already being answered
    "malformed_http",  # 400: not HTTP/1.1
    "head_too_large",  # 431: request line and headers over --max-head-bytes
    "target_too_long",  # 414: a request target over --max-target-bytes
    "head_timeout",  # closed: a request head slower than --head-timeout
    "unproven_timeout",  # closed: no handshake and first request within --head-timeout
    "unproven_pushed_out",  # closed: over --max-unproven-connections
    "idle_pushed_out",  # closed: an idle connection, over --max-connections
    "connections_full",  # refused: --max-connections, all in the middle of a request
    "too_many_headers",  # 431: more request headers than --max-headers
    "pipeline_full",  # closed: over --max-pipelined or --max-queued-requests
    "write_timeout",  # closed: an answer left unread for --write-timeout
    "write_paused_pushed_out",  # closed: over --max-write-paused(-bytes), the oldest first
    "shutdown",  # closed on shutdown before sending a request
)

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        self._declare_admissions(r)
        self._declare_cluster(r)
        self._declare_jobs(r)
        self.capacity.set(-1)
        self._admissions: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._conversions: dict[str, Any] = {}
        # Label children looked up once (`labels()` costs a few microseconds on the hot path).
        self._cache_hits, self._cache_misses = self.cache.labels("hit"), self.cache.labels("miss")
        self._rejections = {reason: self.rejections.labels(reason) for reason in REJECTIONS}
        for reason in REJECTIONS:  # every series present from the start, at 0
            self._rejections[reason].inc(0)

    def _declare_admissions(self, r: CollectorRegistry) -> None:
        self.admissions = Counter(
            "hami_dra_admissions",
            "Admission reviews answered, by operation and outcome",
            ["operation", "outcome"],
            registry=r,
        )
        self.rejections = Counter(
            "hami_dra_http_rejections",
            "Requests and connections refused or closed by the HTTP layer before any admission,"
            " by reason",
            ["reason"],
            registry=r,
        )
        self.in_flight = Gauge(
            "hami_dra_admissions_in_flight", "Admissions being answered now", registry=r
        )
        self.latency = Histogram(
            "hami_dra_admission_duration_seconds",
            "Time from request body to answer, by operation and outcome",
            ["operation", "outcome"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )

    def _declare_cluster(self, r: CollectorRegistry) -> None:
        self.build_info = Gauge(
            "hami_dra_build_info",
            "Always 1: the running version, and the Python it runs on",
            ["version", "python"],
            registry=r,
        )
        self.build_info.labels(__version__, platform.python_version()).set(1)
        self.driver_gpus = Gauge(
            "hami_dra_driver_gpus",
            "GPUs the HAMi DRA driver publishes in ResourceSlices, at the last cluster check"
            " (-1: not read yet)",
            registry=r,
        )
        self.driver_nodes = Gauge(
            "hami_dra_driver_nodes",
            "Nodes whose ResourceSlices publish the driver's GPUs (-1: not read yet)",
            registry=r,
        )
        self.driver_gpus.set(-1)
        self.driver_nodes.set(-1)
        self.templates_created = Counter(
            "hami_dra_template_creations", "ResourceClaimTemplates created", registry=r
        )
        self.cache = Counter(
            "hami_dra_template_cache", "Template cache lookups", ["result"], registry=r
        )
        self.api_errors = Counter(
            "hami_dra_api_errors",
            "Failed Kubernetes API calls by HTTP status (0: no answer)",
            ["code"],
            registry=r,
        )
        self.conversions = Counter(
            "hami_dra_conversions", "Converted pods by legacy resource", ["resource"], registry=r
        )
        self.cert_expiry = Gauge(
            "hami_dra_certificate_expiry_timestamp_seconds",
            "When the serving certificate expires (Unix time)",
            registry=r,
        )
        self.capacity = Gauge(
            "hami_dra_consumable_capacity_effective",
            "1: claims keep consumable capacity; 0: kube-apiserver drops it; -1: not known",
            registry=r,
        )

    def _declare_jobs(self, r: CollectorRegistry) -> None:
        self.gc_deleted = Counter(
            "hami_dra_gc_deleted_templates", "Unused templates deleted by GC", registry=r
        )
        self.background_restarts = Counter(
            "hami_dra_background_restarts",
            "Background jobs that died (or returned) and were restarted, by task (the label is not"
            " `job`, which Prometheus gives its scrape job)",
            ["task"],
            registry=r,
        )
        self.workload_previews = Counter(
            "hami_dra_workload_previews",
            "Workloads answered by POST /validate-workloads, by the worst outcome of their pod"
            " templates (none: no template with legacy GPU resources)",
            ["outcome"],
            registry=r,
        )
        for outcome in ("refused", "converted", "unchanged", "none"):
            self.workload_previews.labels(outcome).inc(0)
        self.quota_released = Counter(
            "hami_dra_gpu_quota_released_pods",
            "GPU pods released from the hami.io/gpu-quota scheduling gate: they fit their"
            " namespace's GPU quota",
            registry=r,
        )
        self.quota_held = Gauge(
            "hami_dra_gpu_quota_held_pods",
            "GPU pods held by the hami.io/gpu-quota gate at the last pass, by the quota key they"
            ' would exceed (key "": waiting for their claims)',
            ["key"],
            registry=r,
        )
        self.quota_held.labels("").set(0)
        self.quota_namespaces = Gauge(
            "hami_dra_gpu_quota_namespaces",
            "Namespaces whose ResourceQuotas name a GPU memory, cores or count key (last pass)",
            registry=r,
        )
        self.fleet = FleetMetrics(r)

    def observe_quota(self, report: Any) -> None:
        """One quota pass: released pods counted, held pods by the key they would exceed."""
        self.quota_released.inc(report.released)
        self.quota_namespaces.set(len(report.limits))
        held: dict[str, int] = {"": 0}
        for pod in report.held:
            held[pod.key] = held.get(pod.key, 0) + 1
        self.quota_held.clear()
        for key, count in held.items():
            self.quota_held.labels(key).set(count)

    def watch_translation_cache(self, cache: Any) -> None:
        """Its hits, misses and size, read at scrape time (nothing on the hot path)."""
        self.registry.register(_CacheCollector(cache))

    def watch_connections(self, guards: dict[str, Any]) -> None:
        """Open and unproven connections of each port's guard, read at scrape time."""
        self.registry.register(_ConnectionCollector(guards))

    def watch_background(self, supervisor: Any) -> None:
        """Whether each background job runs, read at scrape time; each job's restarts counted
        from 0 (a series from the start, for rate() and alerts)."""
        self.registry.register(_BackgroundCollector(supervisor))
        for task in supervisor.states:
            self.background_restarts.labels(task).inc(0)

    def watch_template_store(self, store: Any) -> None:
        """The template watch: standing or not, and how its watches started, at scrape time."""
        self.registry.register(_TemplateWatchCollector(store))

    def background_restarted(self, job: str) -> None:
        self.background_restarts.labels(job).inc()

    def rejected(self, reason: str) -> None:
        self._rejections[reason].inc()

    def admitted(self, operation: str, outcome: str, elapsed: float, resources: list[str]) -> None:
        """Count one admission (label children are cached: `labels()` costs on the hot path)."""
        key = (operation if operation in OPERATIONS else "other", outcome)
        children = self._admissions.get(key)
        if children is None:
            children = self.admissions.labels(*key), self.latency.labels(*key)
            self._admissions[key] = children
        children[0].inc()
        children[1].observe(elapsed)
        if outcome == "converted":
            for resource in resources:
                counter = self._conversions.get(resource)
                if counter is None:
                    counter = self._conversions[resource] = self.conversions.labels(resource)
                counter.inc()

    def observe_cluster(self, state: ClusterState) -> None:
        self.capacity.set(CAPACITY_VALUES[state.capacity])
        self.driver_gpus.set(state.published_gpus)
        self.driver_nodes.set(state.publishing_nodes)
        self.fleet.observe(state)

    def watch_readiness(self, ready: Callable[[], bool]) -> None:
        """What /readyz answers, as a gauge read at scrape time."""
        self.registry.register(_ReadyCollector(ready))

    # StoreEvents
    def cache_hit(self) -> None:
        self._cache_hits.inc()

    def cache_miss(self) -> None:
        self._cache_misses.inc()

    def template_created(self) -> None:
        self.templates_created.inc()

    def api_error(self, status: int) -> None:
        self.api_errors.labels(str(status)).inc()

    def oversized_event(self) -> None:  # counted by the store itself (the watch collector)
        return None


class _ReadyCollector:
    def __init__(self, ready: Callable[[], bool]) -> None:
        self.ready = ready

    def collect(self) -> Any:
        gauge = GaugeMetricFamily(
            "hami_dra_ready", "1 while /readyz answers ready (the replica takes admissions)"
        )
        gauge.add_metric([], 1.0 if self.ready() else 0.0)
        return [gauge]


class _CacheCollector:
    def __init__(self, cache: Any) -> None:
        self.cache = cache

    def collect(self) -> Any:
        lookups = CounterMetricFamily(
            "hami_dra_translation_cache",
            "Translation cache lookups (a hit answers a pod without translating it)",
            labels=["result"],
        )
        lookups.add_metric(["hit"], self.cache.hits)
        lookups.add_metric(["miss"], self.cache.misses)
        size = GaugeMetricFamily(
            "hami_dra_translation_cache_bytes", "Memory held by the translation cache"
        )
        size.add_metric([], self.cache.bytes)
        return [lookups, size]


class _ConnectionCollector:
    def __init__(self, guards: dict[str, Any]) -> None:
        self.guards = guards  # port name ("webhook", "ops") -> ConnectionGuard

    def collect(self) -> Any:
        opened = GaugeMetricFamily(
            "hami_dra_connections_open", "Open connections, by port", labels=["port"]
        )
        unproven = GaugeMetricFamily(
            "hami_dra_connections_unproven",
            "Connections that have not sent a first request (TLS handshake included), by port",
            labels=["port"],
        )
        for port, guard in self.guards.items():
            opened.add_metric([port], guard.open)
            unproven.add_metric([port], len(guard.unproven))
        return [opened, unproven]


class _BackgroundCollector:
    def __init__(self, supervisor: Any) -> None:
        self.supervisor = supervisor

    def collect(self) -> Any:
        up = GaugeMetricFamily(
            "hami_dra_background_up",
            "1 while a background job runs, 0 while it waits to be restarted, by task",
            labels=["task"],
        )
        for name, state in self.supervisor.states.items():
            up.add_metric([name], 1 if state.running else 0)
        return [up]


class _TemplateWatchCollector:
    def __init__(self, store: Any) -> None:
        self.store = store

    def collect(self) -> Any:
        up = GaugeMetricFamily(
            "hami_dra_template_watch_up",
            "1 while the watch that keeps the template cache true stands (while it does not,"
            " templates are confirmed through the API at every admission)",
        )
        up.add_metric([], 1 if self.store.watching else 0)
        starts = CounterMetricFamily(
            "hami_dra_template_watch_starts",
            "Template watches started: listed afresh (the first, after a 410) or resumed from"
            " the last resourceVersion",
            labels=["how"],
        )
        starts.add_metric(["listed"], self.store.watch.relists)
        starts.add_metric(["resumed"], self.store.watch.resumes)
        oversized = CounterMetricFamily(
            "hami_dra_template_watch_oversized_events",
            "Template watch events skipped as too large to be the webhook's (objects someone"
            " else labelled as the webhook's)",
        )
        oversized.add_metric([], self.store.watch.oversized)
        return [up, starts, oversized]
