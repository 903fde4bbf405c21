"""The GPU pools' and node moves' metrics (hami_dra_gpu_pool_*), from the webhook's cluster
check: the Nodes by pool label, the moves under way by step, the oldest and the stopped ones,
and, followed across checks (core/migration/move_state.MoveWatch), each ended move's duration and
each stop, once."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from hami_dra_webhook.cluster.state import ClusterState


class FleetMetrics:
    def __init__(self, r: CollectorRegistry) -> None:
        self.pool_nodes = Gauge(
            "hami_dra_gpu_pool_nodes",
            'GPU nodes by their hami.io/gpu-pool label at the last cluster check (pool "":'
            " unlabelled; moving: between pools)",
            ["pool"],
            registry=r,
        )
        self.pool_moves = Gauge(
            "hami_dra_gpu_pool_moves",
            "Node moves under way (migrate node, migrate wave) by the last step done",
            ["step"],
            registry=r,
        )
        self.pool_move_oldest = Gauge(
            "hami_dra_gpu_pool_move_oldest_seconds",
            "Seconds since the oldest node move under way started (0: none)",
            registry=r,
        )
        self.pool_moves_stopped = Gauge(
            "hami_dra_gpu_pool_moves_stopped",
            "Node moves whose last run stopped with an error (the node stays cordoned)",
            registry=r,
        )
        self.pool_move_seconds = Histogram(
            "hami_dra_gpu_pool_move_duration_seconds",
            "Node moves that ended, from their start to the cluster check that saw them end",
            buckets=(30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400),
            registry=r,
        )
        self.pool_move_failures = Counter(
            "hami_dra_gpu_pool_move_failures_total",
            "Node moves that stopped with an error, by the last step done before the stop",
            ["step"],
            registry=r,
        )

    def observe(self, state: ClusterState) -> None:
        fleet = state.fleet
        if fleet is not None:
            for pool, count in fleet.pools.items():
                self.pool_nodes.labels(pool).set(count)
            for step, count in fleet.steps.items():
                self.pool_moves.labels(step).set(count)
            self.pool_move_oldest.set(fleet.oldest_seconds)
            self.pool_moves_stopped.set(fleet.stopped)
        ended, stops = state.take_move_events()
        for seconds in ended:
            self.pool_move_seconds.observe(seconds)
        for step in stops:
            self.pool_move_failures.labels(step).inc()
