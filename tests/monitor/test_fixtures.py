"""Every region file the real libvgpu.so wrote (../shared/fixtures/hami-core), read through the
monitor's file reader, and every value its README lists found: the header, each slot, and what
HAMi v2.10 exports (the README's column, produced by HAMi's own Go code on the same files), with
the one place this monitor differs on purpose: a killed process's slot is not counted."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from hami_dra_webhook.core.region.usage import Life, RegionUsage, unknown, usage
from hami_dra_webhook.monitor.region_files import Read, read_claim
from tests.monitor.conftest import place

Mi = 1024 * 1024
UUID0 = "GPU-00000000-0000-4000-8000-000000000000"
UUID1 = "GPU-00000000-0000-4000-8000-000000000001"


@dataclass(frozen=True)
class SlotWant:
    pid: int
    hostpid: int
    status: int
    context: int  # MiB, device 0
    data: int
    total: int
    sm_util: int


@dataclass(frozen=True)
class Want:
    """The README's values for one file; `hami` = (used, context, buffer, utilization) MiB/%
    that HAMi v2.10 exports for device 0."""

    limit: int  # MiB
    sm_limit: int
    proc_num: int
    slots: tuple[SlotWant, ...]
    hami: tuple[int, int, int, int]
    last_kernel_time: int | None = None
    priority: int = 1
    switch: int = 1
    recent_kernel: int = 2


WANTED = {
    "a-one-process-running": Want(
        1024, 50, 1, (SlotWant(26183, 126183, 1, 32, 512, 544, 37),), (544, 32, 512, 37),
        last_kernel_time=1796629093,
    ),
    "b-two-processes-running": Want(
        1024, 50, 2,
        (SlotWant(26251, 126251, 1, 32, 256, 288, 20), SlotWant(26262, 126262, 1, 32, 384, 416, 15)),
        (704, 64, 640, 35), last_kernel_time=1796629097,
    ),
    "c-process-exited": Want(
        1024, 50, 1, (SlotWant(0, 126183, 0, 32, 512, 544, 37),), (0, 0, 0, 0)
    ),
    "c-exited-then-new-process": Want(
        1024, 50, 1, (SlotWant(26204, 126204, 1, 32, 128, 160, 11),), (160, 32, 128, 11)
    ),
    "c-process-killed": Want(
        1024, 50, 1, (SlotWant(26219, 126219, 1, 32, 256, 288, 23),), (288, 32, 256, 23)
    ),
    "e-priority-0": Want(
        2048, 60, 1, (SlotWant(26350, 126350, 1, 32, 1024, 1056, 40),), (1056, 32, 1024, 40),
        last_kernel_time=1796629101, priority=0,
    ),
    "e-priority-1": Want(
        1024, 30, 1, (SlotWant(26357, 126357, 1, 32, 512, 544, 25),), (544, 32, 512, 25),
        last_kernel_time=1796629101, priority=1,
    ),
    "f-one-claim-two-pid-namespaces-first": Want(
        1024, 50, 1, (SlotWant(1, 200001, 1, 32, 512, 544, 20),), (544, 32, 512, 20)
    ),
    # monitorused/sm_util of -both are the stand-in's artefact (README): not compared (-1).
    "f-one-claim-two-pid-namespaces-both": Want(
        1024, 50, 1, (SlotWant(1, 300001, 1, 32, 256, 288, -1),), (288, 32, 256, -1)
    ),
    "g-after-feedback-priority-0": Want(
        2048, 60, 1, (SlotWant(24016, 124016, 1, 32, 256, 288, 10),), (288, 32, 256, 10),
        last_kernel_time=1796629792, priority=0, switch=0, recent_kernel=2,
    ),
    "g-after-feedback-priority-1": Want(
        1024, 30, 1, (SlotWant(24027, 124027, 1, 32, 256, 288, 10),), (288, 32, 256, 10),
        last_kernel_time=1796629790, priority=1, switch=1, recent_kernel=-1,
    ),
    "h-hostpid-not-found": Want(
        1024, 50, 1, (SlotWant(25531, 0, 1, 0, 512, 512, 0),), (512, 0, 512, 0),
        last_kernel_time=1796629846, recent_kernel=1,
    ),
}  # fmt: skip


def _read(tmp_path: Path, name: str) -> Read:
    claim, _ = place(tmp_path, name)
    read = read_claim(tmp_path, claim)
    assert isinstance(read, Read), read
    return read


@pytest.mark.parametrize("name", sorted(WANTED))
def test_every_value_the_readme_lists(tmp_path: Path, name: str) -> None:
    want = WANTED[name]
    read = _read(tmp_path, name)
    header = read.region.header
    assert header.device_count == 1 and header.uuids == (UUID0,)
    assert header.limits == (want.limit * Mi,) and header.sm_limits == (want.sm_limit,)
    assert header.proc_num == want.proc_num == len(read.region.slots)
    assert (header.priority, header.utilization_switch, header.recent_kernel) == (
        want.priority,
        want.switch,
        want.recent_kernel,
    )
    if want.last_kernel_time is not None:
        assert header.last_kernel_time == want.last_kernel_time
    assert read.unsettled == 0
    for slot, wanted in zip(read.region.slots, want.slots, strict=True):
        assert (slot.pid, slot.hostpid, slot.status) == (wanted.pid, wanted.hostpid, wanted.status)
        memory = slot.memory[0]
        assert (memory.context, memory.data, memory.total) == (
            wanted.context * Mi,
            wanted.data * Mi,
            wanted.total * Mi,
        )
        assert memory.module == memory.offset == 0  # 8c32de6 never writes them
        assert slot.seqlock % 2 == 0
        if wanted.sm_util >= 0:
            assert slot.sm_util == (wanted.sm_util,)
    # HAMi's rule (no process table: every slot with status != 0 counts): its exports.
    exported = usage(read.region, unknown).devices
    assert len(exported) == 1
    device = exported[0]
    used, context, buffer, utilization = want.hami
    assert (device.used, device.context, device.data) == (used * Mi, context * Mi, buffer * Mi)
    assert device.limit == want.limit * Mi and device.uuid == UUID0
    if utilization >= 0:
        assert device.sm_util == utilization


def test_two_devices(tmp_path: Path) -> None:
    read = _read(tmp_path, "d-two-devices")
    header = read.region.header
    assert header.device_count == 2 and header.uuids == (UUID0, UUID1)
    assert header.limits == (1024 * Mi, 2048 * Mi) and header.sm_limits == (50, 25)
    (slot,) = read.region.slots
    assert (slot.pid, slot.hostpid, slot.status, slot.seqlock) == (26314, 126314, 1, 10)
    assert [m.total for m in slot.memory] == [544 * Mi, 1056 * Mi]
    assert [m.data for m in slot.memory] == [512 * Mi, 1024 * Mi]
    assert slot.sm_util == (9, 9)
    devices = usage(read.region, unknown).devices
    assert [(d.index, d.uuid, d.used, d.limit) for d in devices] == [
        (0, UUID0, 544 * Mi, 1024 * Mi),
        (1, UUID1, 1056 * Mi, 2048 * Mi),
    ]


def _killed(hostpid: int, pid: int) -> Life:
    return Life.GONE if (hostpid, pid) == (126219, 26219) else Life.ALIVE


def test_a_killed_process_is_not_counted(tmp_path: Path) -> None:
    """HAMi v2.10 exports 288 MiB and 23% for the SIGKILLed process forever; its host PID no
    longer runs, so this monitor counts nothing."""
    read = _read(tmp_path, "c-process-killed")
    counted: RegionUsage = usage(read.region, _killed)
    assert (counted.counted, counted.gone, counted.exited) == (0, 1, 0)
    assert counted.devices[0].used == 0 and counted.devices[0].sm_util == 0
    assert counted.devices[0].limit == 1024 * Mi  # the limit stays: the claim still has it


def test_an_exited_process_is_not_counted(tmp_path: Path) -> None:
    counted = usage(_read(tmp_path, "c-process-exited").region, lambda h, p: Life.ALIVE)
    assert (counted.counted, counted.exited) == (0, 1) and counted.devices[0].used == 0
