"""Prometheus metrics, on a registry of the app's own (so that tests can build many apps)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from hami_dra_webhook.cluster.state import ClusterState

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
CAPACITY_VALUES = {"unknown": -1, "dropped": 0, "effective": 1}


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.admissions = Counter(
            "hami_dra_admissions",
            "Admission reviews answered",
            ["operation", "outcome"],
            registry=r,
        )
        self.latency = Histogram(
            "hami_dra_admission_duration_seconds",
            "Time from request body to answer",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.templates_created = Counter(
            "hami_dra_templates_created", "ResourceClaimTemplates created", registry=r
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
        self.gc_deleted = Counter(
            "hami_dra_gc_deleted_templates", "Unused templates deleted by GC", registry=r
        )
        self.capacity.set(-1)
        self._admissions: dict[tuple[str, str], Any] = {}
        self._conversions: dict[str, Any] = {}

    def admitted(self, operation: str, outcome: str, elapsed: float, resources: list[str]) -> None:
        """Count one admission (label children are cached: `labels()` costs on the hot path)."""
        key = (operation, outcome)
        child = self._admissions.get(key)
        if child is None:
            child = self._admissions[key] = self.admissions.labels(operation, outcome)
        child.inc()
        self.latency.observe(elapsed)
        if outcome == "converted":
            for resource in resources:
                counter = self._conversions.get(resource)
                if counter is None:
                    counter = self._conversions[resource] = self.conversions.labels(resource)
                counter.inc()

    def observe_cluster(self, state: ClusterState) -> None:
        self.capacity.set(CAPACITY_VALUES[state.capacity])

    # StoreEvents
    def cache_hit(self) -> None:
        self.cache.labels("hit").inc()

    def cache_miss(self) -> None:
        self.cache.labels("miss").inc()

    def template_created(self) -> None:
        self.templates_created.inc()

    def api_error(self, status: int) -> None:
        self.api_errors.labels(str(status)).inc()
