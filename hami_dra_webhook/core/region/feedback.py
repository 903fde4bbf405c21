"""HAMi v2.10's feedback loop (`cmd/vGPUmonitor/feedback.go` `Observe`) as a pure function of
what one tick reads: which regions were active (a rate-limited launch wrote `recent_kernel` 2
since the last tick), then, for each region, whether a region of higher priority (a lower
number) is active on one of its GPUs (block it: `recent_kernel` -1) and whether it is alone at
its priority (switch its SM limit off: `utilization_switch` 0). ../shared/NODE-MONITOR.md,
section 6, step by step; a negative priority is never counted, never blocked, and gets 0.

The GPUs a region is on are the caller's to give: on a node, the devices the cluster allocated
to the claim (the UUIDs written in the file are the tenant's to forge)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Observed:
    key: Hashable  # the caller's name for the region
    priority: int
    recent_kernel: int
    utilization_switch: int
    gpus: frozenset[str]


@dataclass(frozen=True, slots=True)
class Writes:
    """What to store in one region; None: leave the field as it is."""

    key: Hashable
    recent_kernel: int | None
    utilization_switch: int | None


def observe(regions: Sequence[Observed]) -> list[Writes]:
    active: defaultdict[str, defaultdict[int, int]] = defaultdict(lambda: defaultdict(int))
    fresh: dict[Hashable, int] = {}
    decremented: set[Hashable] = set()
    # Pass 1: decay recent_kernel; a region still above 0 after the decay is active.
    for region in regions:
        kernel = region.recent_kernel
        if kernel > 0:
            kernel -= 1
            decremented.add(region.key)
            if kernel > 0 and region.priority >= 0:
                for gpu in region.gpus:
                    active[gpu][region.priority] += 1
        fresh[region.key] = kernel
    # Pass 2: block under an active higher priority; the SM limit on only beside a peer.
    writes = []
    for region in regions:
        kernel = fresh[region.key]
        # over the priorities seen active, never over range(priority): the number is the
        # tenant's to write, 2**31 - 1 included
        blocked = any(
            count > 0 and higher < region.priority
            for gpu in region.gpus
            for higher, count in active[gpu].items()
        )
        store: int | None = kernel if region.key in decremented else None
        if blocked and kernel >= 0:
            store = -1
        elif not blocked and kernel < 0:
            store = 0
        limited = blocked or any(active[gpu].get(region.priority, 0) > 1 for gpu in region.gpus)
        switch = 1 if limited else 0
        writes.append(
            Writes(
                region.key,
                store if store != region.recent_kernel else None,
                switch if switch != region.utilization_switch else None,
            )
        )
    return writes
