"""The monitor's life on a node: the owners view (two watches), the metrics endpoint (a scrape
reads the regions), and the feedback loop every `feedback_interval` seconds, until cancelled.
Each part logs and carries on when one round fails: a broken file or a lost watch stops no
other part, and never the node's pods."""

from __future__ import annotations

import asyncio
import ctypes
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest, start_http_server

from hami_dra_webhook.cluster.claim_owners import ClaimOwner, ClaimOwners
from hami_dra_webhook.core.region.feedback import Observed, observe
from hami_dra_webhook.core.region.usage import Liveness, unknown
from hami_dra_webhook.kube.port import KubeApi
from hami_dra_webhook.monitor.exposition import Health, RegionCollector
from hami_dra_webhook.monitor.processes import HostProcesses
from hami_dra_webhook.monitor.region_files import Read, read_claim, write_fields

log = logging.getLogger("hami_dra_webhook.monitor")


def _malloc_trim() -> Callable[[], None]:
    """glibc's malloc_trim(0), or nothing where there is none: a scrape's text (a few hundred
    KiB) is allocated and freed every 15 s, and glibc keeps what it freed unless asked."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return lambda: None

    def trimmed() -> None:
        trim(0)

    return trimmed


TRIM = _malloc_trim()


@dataclass(frozen=True)
class MonitorSettings:
    claims_root: Path
    node_name: str
    driver: str = "hami-core-gpu.project-hami.io"
    host: str = "0.0.0.0"  # a DaemonSet's metrics port, as HAMi's :9394
    port: int = 9394
    feedback: bool = True
    feedback_interval: float = 5.0
    legacy_metrics: bool = False
    proc: Path | None = Path("/proc")  # None: no process check (HAMi's rule)


def liveness_of(proc: Path | None) -> Liveness:
    return HostProcesses(proc) if proc is not None else unknown


def feedback_once(root: Path, owners: Mapping[str, ClaimOwner], health: Health) -> None:
    """One round of HAMi's loop over the regions of the claims the cluster names; the GPUs of
    each are the devices the cluster allocated (a claim whose devices' UUIDs are not known yet
    takes no part: neither counted nor switched)."""
    reads: dict[str, Read] = {}
    observed: list[Observed] = []
    for claim_uid, owner in owners.items():
        if not owner.uuids:
            continue
        result = read_claim(root, claim_uid)
        if not isinstance(result, Read):
            continue
        header = result.region.header
        reads[claim_uid] = result
        observed.append(
            Observed(
                claim_uid,
                header.priority,
                header.recent_kernel,
                header.utilization_switch,
                owner.uuids,
            )
        )
    for write in observe(observed):
        identity = reads[str(write.key)].identity
        if write.recent_kernel is None and write.utilization_switch is None:
            continue
        if write_fields(root, identity, write.recent_kernel, write.utilization_switch):
            health.feedback_writes["recent_kernel"] += write.recent_kernel is not None
            health.feedback_writes["utilization_switch"] += write.utilization_switch is not None
    health.feedback_ticks += 1


class Monitor:
    def __init__(self, settings: MonitorSettings, api: KubeApi) -> None:
        self.settings = settings
        self.owners = ClaimOwners(api, settings.node_name, settings.driver)
        self.health = Health(
            claim_reads=lambda: self.owners.reads, owners_synced=lambda: self.owners.synced
        )
        self.registry = CollectorRegistry()
        self.registry.register(
            RegionCollector(
                settings.claims_root,
                lambda: self.owners.owners,
                liveness_of(settings.proc),
                self.health,
                settings.legacy_metrics,
            )
        )

    async def run(self) -> None:
        server, _ = start_http_server(self.settings.port, self.settings.host, self.registry)
        log.info(
            "monitoring the claims under %s on node %s; metrics on %s:%d, feedback loop %s",
            self.settings.claims_root, self.settings.node_name, self.settings.host,
            self.settings.port,
            f"every {self.settings.feedback_interval:g}s" if self.settings.feedback else "off",
        )  # fmt: skip
        try:
            await asyncio.gather(self.owners.run(), self._rounds())
        finally:
            server.shutdown()
            server.server_close()

    async def _rounds(self) -> None:
        """Every feedback_interval: HAMi's feedback loop (when on), then memory freed since
        given back."""
        while True:
            await asyncio.sleep(self.settings.feedback_interval)
            if self.settings.feedback and self.owners.synced:
                self._feedback()
            TRIM()

    def _feedback(self) -> None:
        """On the loop itself: a round reads a few KiB a region (about 10 ms for 120), and a
        worker thread would hold an allocator arena of its own."""
        try:
            feedback_once(self.settings.claims_root, self.owners.owners, self.health)
        except Exception:  # the next round tries again
            log.exception("a round of the feedback loop failed")


def read_once(root: Path, proc: Path | None, legacy_metrics: bool, as_json: bool) -> str:
    """What the claims folder holds now, without a cluster: the exposition text, or JSON."""
    registry = CollectorRegistry()
    registry.register(RegionCollector(root, None, liveness_of(proc), Health(), legacy_metrics))
    if not as_json:
        return generate_latest(registry).decode()
    samples = [
        {"name": sample.name, "labels": sample.labels, "value": sample.value}
        for family in registry.collect()
        for sample in family.samples
    ]
    return json.dumps({"claimsRoot": str(root), "samples": samples}, indent=2) + "\n"
