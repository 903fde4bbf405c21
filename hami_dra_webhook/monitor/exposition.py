"""The metrics a scrape sees: HAMi v2.10's per-container series (same names, types and labels,
each with HAMi's `zone="vGPU"`), the DRA labels beside them, HAMi's old names behind
`legacy_metrics`, and the monitor's own health. Each scrape reads the claims folder as it is
(new and removed claims need no restart) and names owners from the last view of the cluster.

A claim used by several containers (its region is one file for all of them) gives one series
per device, whose `pod` and `container` list every pod and container using the claim, sorted
and joined with commas; `hami_dra_claim_container_info` has one series per container, for
joins."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from hami_dra_webhook.cluster.claim_owners import ClaimOwner
from hami_dra_webhook.core.region.usage import DeviceUsage, Liveness, usage
from hami_dra_webhook.monitor.region_files import Read, Skipped, list_claims, read_claim

log = logging.getLogger("hami_dra_webhook.monitor")
ZONE = "vGPU"
LABELS = ("namespace", "pod", "container", "vdevice_index", "device_uuid")
DRA_LABELS = ("claim_namespace", "claim", "claim_uid", "device", "pool", "zone")
LEGACY_LABELS = ("podnamespace", "podname", "ctrname", "vdeviceid", "deviceuuid", "zone")
MEMORY_PARTS = ("context_size", "module_size", "buffer_size", "offset")
LEGACY_PARTS = ("context", "module", "data", "offset")
NOT_IN_CLAIM = "device-not-in-claim"  # a UUID in the file that the claim was not allocated
MAX_LOGGED = 4096  # (claim, reason) pairs logged once each; then the set starts again


@dataclass
class Health:
    """What the monitor did, for its own metrics: counters only grow."""

    reads: Counter[str] = field(default_factory=Counter)  # outcome -> regions read
    feedback_writes: Counter[str] = field(default_factory=Counter)  # field -> stores
    feedback_ticks: int = 0
    claim_reads: Callable[[], int] = lambda: 0
    owners_synced: Callable[[], bool] = lambda: False
    logged: set[tuple[str, str]] = field(default_factory=set)

    def skipped(self, skip: Skipped) -> None:
        self.reads[skip.reason] += 1
        if (skip.claim_uid, skip.reason) not in self.logged:
            if len(self.logged) >= MAX_LOGGED:
                self.logged.clear()
            self.logged.add((skip.claim_uid, skip.reason))
            log.warning(
                "skipped the region of claim %s: %s (%s)", skip.claim_uid, skip.reason, skip.detail
            )


@dataclass(frozen=True)
class Family:
    name: str
    help: str
    labels: tuple[str, ...]


USED = Family(
    "hami_vgpu_memory_used_bytes", "GPU memory the container's processes use (bytes)", LABELS
)
FAMILIES = (
    USED,
    Family("hami_vgpu_memory_limit_bytes", "GPU memory limit of the container (bytes)", LABELS),
    Family(
        "hami_container_device_memory_bytes",
        "GPU memory the container uses (bytes), with its parts as labels (as HAMi)",
        LABELS + MEMORY_PARTS,
    ),
    Family("hami_vgpu_memory_context_bytes", "GPU memory held by CUDA contexts (bytes)", LABELS),
    Family("hami_vgpu_memory_module_bytes", "GPU memory held by modules (bytes)", LABELS),
    Family(
        "hami_vgpu_memory_buffer_bytes", "GPU memory allocated by the processes (bytes)", LABELS
    ),
    Family(
        "hami_container_device_utilization_ratio",
        "SM utilization of the container (percent)",
        LABELS,
    ),
    Family(
        "hami_container_last_kernel_elapsed_seconds",
        "Seconds since the container last launched a kernel",
        LABELS,
    ),
)
OLD = " (HAMi's old name)"
LEGACY = (
    Family("vGPU_device_memory_usage_in_bytes", "vGPU memory used" + OLD, LEGACY_LABELS),
    Family("vGPU_device_memory_limit_in_bytes", "vGPU memory limit" + OLD, LEGACY_LABELS),
    Family(
        "Device_memory_desc_of_container",
        "Container GPU memory and its parts" + OLD,
        LEGACY_LABELS + LEGACY_PARTS,
    ),
    Family("Device_utilization_desc_of_container", "Container SM utilization" + OLD, LEGACY_LABELS),
    Family("Device_last_kernel_of_container", "Seconds since the last kernel" + OLD, LEGACY_LABELS),
)


def _values(device: DeviceUsage, last_kernel: int, now: float) -> list[float | None]:
    """In FAMILIES' order; None: no series (HAMi sends no last-kernel series for 0)."""
    elapsed = max(now - last_kernel, 0.0) if last_kernel > 0 else None
    return [
        device.used, device.limit, device.used, device.context, device.module, device.data,
        device.sm_util, elapsed,
    ]  # fmt: skip


class RegionCollector(Collector):
    def __init__(
        self,
        root: Path,
        owners: Callable[[], Mapping[str, ClaimOwner]] | None,
        liveness: Liveness,
        health: Health,
        legacy_metrics: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`owners` None: no cluster (a person's one-shot read): every region is exported with
        the claim's UID only."""
        self.root, self.owners, self.liveness, self.health = root, owners, liveness, health
        self.legacy_metrics, self.clock = legacy_metrics, clock

    def describe(self) -> list[Metric]:
        return []  # collected at each scrape (an empty description: no collect at register)

    def collect(self) -> Iterator[Metric]:
        started = time.perf_counter()
        now = self.clock()
        owners = self.owners() if self.owners is not None else None
        main = [
            GaugeMetricFamily(f.name, f.help, labels=[*f.labels, *DRA_LABELS]) for f in FAMILIES
        ]
        legacy = [GaugeMetricFamily(f.name, f.help, labels=list(f.labels)) for f in LEGACY]
        info = GaugeMetricFamily(
            "hami_dra_claim_container_info",
            "1 for each container using a claim whose HAMi-core region is on this node",
            labels=["namespace", "pod", "container", "claim", "claim_uid"],
        )
        states: Counter[str] = Counter()
        slots: Counter[str] = Counter()
        listing = list_claims(self.root)
        for claim_uid in listing.claims:
            result = read_claim(self.root, claim_uid)
            if result is None:
                states["empty"] += 1
                continue
            if isinstance(result, Skipped):
                self.health.skipped(Skipped(claim_uid, result.reason, result.detail))
                states["skipped"] += 1
                continue
            owner = owners.get(claim_uid) if owners is not None else None
            if owners is not None and owner is None:
                states["unowned"] += 1  # prepared for no pod of this node that the cluster names
                continue
            self.health.reads["read"] += 1
            states["read"] += 1
            counted = usage(result.region, self.liveness)
            slots.update(
                counted=counted.counted,
                exited=counted.exited,
                gone=counted.gone,
                unknown=counted.unknown,
            )
            self._series(
                result, owner, counted.devices, counted.last_kernel_time, now, main, legacy
            )
            if owner is not None:
                for pod, container in owner.containers:
                    info.add_metric([owner.namespace, pod, container, owner.claim, owner.uid], 1)
        yield from main
        if self.legacy_metrics:
            yield from legacy
        yield info
        yield from self._health(states, slots, listing.ignored, time.perf_counter() - started)

    def _series(
        self,
        read: Read,
        owner: ClaimOwner | None,
        devices: tuple[DeviceUsage, ...],
        last_kernel: int,
        now: float,
        main: list[GaugeMetricFamily],
        legacy: list[GaugeMetricFamily],
    ) -> None:
        claim_uid = read.identity.claim_uid
        if owner is not None:
            where = [
                owner.namespace,
                ",".join(owner.pods),
                ",".join(sorted({c for _, c in owner.containers})),
            ]
            allocated = {d.uuid: d for d in owner.devices if d.uuid}
        else:
            where, allocated = ["", "", ""], {}
        for device in devices:
            dra = allocated.get(device.uuid)
            if owner is not None and dra is None:
                self.health.skipped(
                    Skipped(claim_uid, NOT_IN_CLAIM, f"device {device.index} {device.uuid}")
                )
                continue
            labels = [*where, str(device.index), device.uuid]
            extra = [
                owner.namespace if owner else "", owner.claim if owner else "", claim_uid,
                dra.name if dra else "", dra.pool if dra else "", ZONE,
            ]  # fmt: skip
            parts = [str(device.context), str(device.module), str(device.data), str(device.offset)]
            for family, value in zip(main, _values(device, last_kernel, now), strict=True):
                if value is None:
                    continue
                own = parts if family.name == "hami_container_device_memory_bytes" else []
                family.add_metric([*labels, *own, *extra], float(value))
            if self.legacy_metrics:
                values = _values(device, last_kernel, now)
                old = [values[0], values[1], values[0], values[6], values[7]]
                for family, value in zip(legacy, old, strict=True):
                    if value is not None:
                        own = parts if family.name == "Device_memory_desc_of_container" else []
                        family.add_metric([*labels, ZONE, *own], float(value))

    def _health(
        self, states: Counter[str], slots: Counter[str], ignored: int, seconds: float
    ) -> Iterator[Metric]:
        regions = GaugeMetricFamily(
            "hami_dra_monitor_regions",
            "Claim folders on this node at the last scrape, by what their region was",
            labels=["state"],
        )
        for state in ("read", "skipped", "unowned", "empty"):
            regions.add_metric([state], states[state])
        yield regions
        gauge = GaugeMetricFamily(
            "hami_dra_monitor_slots",
            "Process slots of the regions read, by whether they count (gone: killed)",
            labels=["state"],
        )
        for state in ("counted", "exited", "gone", "unknown"):
            gauge.add_metric([state], slots[state])
        yield gauge
        reads = CounterMetricFamily(
            "hami_dra_monitor_region_reads",
            "Regions read, and regions skipped by reason (a file that does not hold up)",
            labels=["outcome"],
        )
        for outcome, count in sorted(self.health.reads.items()):
            reads.add_metric([outcome], count)
        yield reads
        writes = CounterMetricFamily(
            "hami_dra_monitor_feedback_writes",
            "Fields the feedback loop stored in regions",
            labels=["field"],
        )
        for name in ("recent_kernel", "utilization_switch"):
            writes.add_metric([name], self.health.feedback_writes[name])
        yield writes
        yield CounterMetricFamily(
            "hami_dra_monitor_feedback_ticks",
            "Rounds of the feedback loop",
            value=self.health.feedback_ticks,
        )
        yield CounterMetricFamily(
            "hami_dra_monitor_claim_reads",
            "ResourceClaims read by name from the API",
            value=self.health.claim_reads(),
        )
        yield GaugeMetricFamily(
            "hami_dra_monitor_ignored_entries",
            "Entries of the claims folder that are not a claim's folder",
            value=ignored,
        )
        yield GaugeMetricFamily(
            "hami_dra_monitor_owners_synced",
            "1 when the view of the node's pods and slices is listed and watched",
            value=1 if self.health.owners_synced() else 0,
        )
        yield GaugeMetricFamily(
            "hami_dra_monitor_scrape_seconds",
            "Time the last scrape took to read the regions",
            value=seconds,
        )
