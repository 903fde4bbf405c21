"""What a region says its processes use, device by device, counting only the slots whose
process is there. HAMi v2.10 counts every slot with `status` ≠ 0, so a SIGKILLed process (no
exit handler ran: `status` stays 1) is counted forever; here a slot counts when its `status`
is not 0 AND its process is not known to be gone. Whether it is gone is the caller's to say
(`Liveness`: on a node, /proc of the host PID the slot names and that process's PID in its own
namespace; see docs/node-monitor.md)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from hami_dra_webhook.core.region.decode import Region, Slot


class Life(Enum):
    ALIVE = "alive"  # the host PID runs, and is the slot's process
    GONE = "gone"  # no such host process, or another process under that PID
    UNKNOWN = "unknown"  # no host PID to check (detection failed): counted, as HAMi does


class Liveness(Protocol):
    def __call__(self, hostpid: int, pid: int) -> Life: ...


def unknown(hostpid: int, pid: int) -> Life:
    """Nothing to check against (a file read away from its node): HAMi's rule alone."""
    return Life.UNKNOWN


@dataclass(frozen=True, slots=True)
class DeviceUsage:
    index: int  # the device's index in the region (NVML order in the container)
    uuid: str
    limit: int  # bytes, 0 = none
    sm_limit: int  # percent
    used: int  # Σ total over counted slots: what libvgpu.so checks against the limit
    context: int
    module: int
    data: int
    offset: int
    sm_util: int  # Σ sm_util over counted slots


@dataclass(frozen=True, slots=True)
class RegionUsage:
    devices: tuple[DeviceUsage, ...]  # indexes whose UUID is a UUID
    last_kernel_time: int
    counted: int  # slots counted
    exited: int  # status 0
    gone: int  # status ≠ 0, process gone (killed)
    unknown: int  # counted without a host PID to check


def usage(region: Region, liveness: Liveness) -> RegionUsage:
    header = region.header
    counted: list[Slot] = []
    exited = gone = not_known = 0
    for slot in region.slots:
        if slot.status == 0:
            exited += 1
            continue
        life = liveness(slot.hostpid, slot.pid)
        if life is Life.GONE:
            gone += 1
            continue
        not_known += life is Life.UNKNOWN
        counted.append(slot)
    devices = []
    for index, uuid in enumerate(header.uuids):
        if uuid is None:
            continue
        memory = [slot.memory[index] for slot in counted]
        context = sum(m.context for m in memory)
        module = sum(m.module for m in memory)
        data = sum(m.data for m in memory)
        total = sum(m.total for m in memory)
        devices.append(
            DeviceUsage(
                index=index,
                uuid=uuid,
                limit=header.limits[index],
                sm_limit=header.sm_limits[index],
                used=total,
                context=context,
                module=module,
                data=data,
                offset=max(total - context - module - data, 0),
                sm_util=sum(slot.sm_util[index] for slot in counted),
            )
        )
    return RegionUsage(
        tuple(devices), header.last_kernel_time, len(counted), exited, gone, not_known
    )
