"""The monitor process on the real control plane (the shared 1.36 one, whose GPU node has no
kubelet): real pods, placed by the real kube-scheduler with real DRA allocations on the node's
published cards, and regions written in the claims' folders as libvgpu.so writes them (a
stand-in for a GPU process: there is no GPU here). The monitor names every series from what the
cluster says, never from the file."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hami_dra_webhook.core.region import layout
from tests.monitor.cluster_pods import claim, gpu_pod
from tests.monitor.conftest import claim_region, fields, poke
from tests.monitor.monitor_process import MonitorProcess, series
from tests.ops.test_alerts import promtool
from tests.support.cluster import Cluster, wait_for

Mi = 1024 * 1024


@pytest.fixture
def monitor(kube: Cluster, tmp_path: Path, device_class: str) -> Iterator[MonitorProcess]:
    root = tmp_path / "claims"
    root.mkdir()
    process = MonitorProcess(
        tmp_path,
        root,
        *("--kubeconfig", str(kube.plane.admin_kubeconfig), "--node-name", kube.node.name),
        *("--feedback-interval", "0.3"),
    )
    yield process
    process.stop()


@pytest.mark.plane
def test_a_shared_claims_series_name_its_pod_and_containers(
    kube: Cluster, monitor: MonitorProcess, namespace: str
) -> None:
    card = kube.node.gpus[0]
    claim(kube, namespace, "shared", card.uuid)
    claim_uid = gpu_pod(kube, namespace, "trainer", "shared", ("main", "side"))
    claim_region(monitor.root, claim_uid, card.uuid, pid=os.getpid(), hostpid=os.getpid())

    def used() -> list[Any]:
        return series(monitor.scrape(), "hami_vgpu_memory_used_bytes", claim_uid=claim_uid)

    (sample,) = wait_for(used, "the claim's series", timeout=30)
    labels = sample[1]
    assert labels["namespace"] == namespace and labels["pod"] == "trainer"
    assert labels["container"] == "main,side"  # one region for both: one series, both named
    assert (labels["claim"], labels["claim_namespace"]) == ("shared", namespace)
    assert (labels["device"], labels["pool"]) == (card.device_name, kube.node.name)
    assert (labels["device_uuid"], labels["vdevice_index"], labels["zone"]) == (
        card.uuid,
        "0",
        "vGPU",
    )
    assert sample[2] == 544 * Mi
    samples = monitor.scrape()
    assert series(samples, "hami_vgpu_memory_limit_bytes", claim_uid=claim_uid)[0][2] == 1024 * Mi
    assert (
        series(samples, "hami_container_device_utilization_ratio", claim_uid=claim_uid)[0][2] == 37
    )
    info = series(samples, "hami_dra_claim_container_info", claim_uid=claim_uid)
    assert sorted(s[1]["container"] for s in info) == ["main", "side"]
    _promtool_passes(monitor.scrape_text())

    # the process is killed: its slot keeps status 1 (no exit handler ran), and counts no more
    poke(
        next((monitor.root / claim_uid).iterdir()),
        layout.slot_at(0) + layout.SLOT_HOSTPID_AT,
        1 << 21,
    )
    wait_for(lambda: used() and used()[0][2] == 0, "the killed process's memory to go", timeout=10)
    assert series(monitor.scrape(), "hami_dra_monitor_slots", state="gone")[0][2] == 1

    # the pod goes: its series go with it
    kube.kubectl("delete", "pod", "trainer", "-n", namespace, "--grace-period=0", "--force")
    wait_for(lambda: not used(), "the series to go with the pod", timeout=30)
    assert series(monitor.scrape(), "hami_dra_monitor_regions", state="unowned")[0][2] == 1


@pytest.mark.plane
def test_a_region_naming_another_card_or_no_claim_gives_no_series(
    kube: Cluster, monitor: MonitorProcess, namespace: str
) -> None:
    card, other = kube.node.gpus[0], kube.node.gpus[1]
    claim(kube, namespace, "forger", card.uuid)
    claim_uid = gpu_pod(kube, namespace, "forger", "forger", ("main",))
    claim_region(monitor.root, claim_uid, other.uuid, pid=os.getpid(), hostpid=os.getpid())
    # a folder the cluster knows nothing of (a claim UID no pod of the node uses)
    claim_region(monitor.root, "00000000-0000-4000-8000-0000000000aa", card.uuid, pid=1, hostpid=0)
    wait_for(
        lambda: series(
            monitor.scrape(), "hami_dra_monitor_region_reads_total", outcome="device-not-in-claim"
        ),
        "the forged card to be counted as skipped",
        timeout=30,
    )
    samples = monitor.scrape()
    assert not series(samples, "hami_vgpu_memory_used_bytes")
    assert series(samples, "hami_dra_monitor_regions", state="unowned")[0][2] >= 1
    assert "skipped the region of claim" in monitor.log()


@pytest.mark.plane
def test_the_feedback_loop_on_regions_of_the_cluster(
    kube: Cluster, monitor: MonitorProcess, namespace: str
) -> None:
    """Two claims on one card: alone, a region's SM limit goes off (switch 0); with an active
    peer at its priority it comes back on (1); under an active higher priority it is blocked
    (recent_kernel -1), and freed when that one stops. A thread plays libvgpu.so's rate limiter:
    each launch writes recent_kernel 2, and a blocked process (field < 0) launches nothing."""
    card = kube.node.gpus[2]
    claim(kube, namespace, "first", card.uuid)
    claim(kube, namespace, "second", card.uuid)
    first = claim_region(
        monitor.root,
        gpu_pod(kube, namespace, "first", "first", ("main",)),
        card.uuid,
        pid=os.getpid(),
        hostpid=os.getpid(),
    )
    second_uid = gpu_pod(kube, namespace, "second", "second", ("main",))
    active = {first: threading.Event()}
    stop = threading.Event()

    def launches() -> None:
        while not stop.wait(0.05):
            for path, running in list(active.items()):
                if running.is_set() and fields(path)[0] >= 0:
                    poke(path, layout.RECENT_KERNEL_AT, 2)

    launcher = threading.Thread(target=launches)
    launcher.start()
    try:
        active[first].set()
        wait_for(
            lambda: fields(first)[1] == 0,
            "the first, alone on its card, to lose its SM limit",
            timeout=15,
        )
        second = claim_region(
            monitor.root, second_uid, card.uuid, pid=os.getpid(), hostpid=os.getpid()
        )
        active[second] = threading.Event()
        active[second].set()
        wait_for(
            lambda: fields(first)[1] == 1 and fields(second)[1] == 1,
            "both limited beside a peer",
            timeout=15,
        )
        active[second].clear()  # the second stops launching: the first is alone again
        wait_for(lambda: fields(first)[1] == 0, "the first alone again", timeout=15)
        poke(second, layout.PRIORITY_AT, 0)  # the second now runs at a higher priority
        active[second].set()
        wait_for(lambda: fields(first)[0] == -1, "the first blocked under priority 0", timeout=15)
        active[second].clear()
        wait_for(lambda: fields(first)[0] >= 0, "the first freed when priority 0 stops", timeout=15)
    finally:
        stop.set()
        launcher.join()
    writes = series(
        monitor.scrape(), "hami_dra_monitor_feedback_writes_total", field="utilization_switch"
    )
    assert writes and writes[0][2] >= 3


@pytest.mark.plane
def test_idle_it_reads_nothing_but_its_watches(
    kube: Cluster, monitor: MonitorProcess, namespace: str
) -> None:
    card = kube.node.gpus[1]
    claim(kube, namespace, "idle", card.uuid)
    claim_uid = gpu_pod(kube, namespace, "idle", "idle", ("main",))
    claim_region(monitor.root, claim_uid, card.uuid, pid=os.getpid(), hostpid=os.getpid())
    wait_for(
        lambda: series(monitor.scrape(), "hami_vgpu_memory_used_bytes", claim_uid=claim_uid),
        "the series",
        timeout=30,
    )
    before = series(monitor.scrape(), "hami_dra_monitor_claim_reads_total")[0][2]
    assert before >= 1
    for _ in range(10):  # scrapes and about 10 feedback rounds
        monitor.scrape()
        threading.Event().wait(0.3)
    assert series(monitor.scrape(), "hami_dra_monitor_claim_reads_total")[0][2] == before


def _promtool_passes(text: str) -> None:
    done = subprocess.run(
        [promtool(), "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_promtool_on_hamis_old_names(tmp_path: Path) -> None:
    """--legacy-metrics: promtool's only complaints are HAMi's own two camelCase names (kept as
    they are: dashboards query them)."""
    claim_region(
        tmp_path, str(uuid.uuid4()), "GPU-00000000-0000-4000-8000-000000000000", pid=1, hostpid=0
    )
    once = subprocess.run(
        [sys.executable, "-m", "hami_dra_webhook", "monitor", "--once", "--legacy-metrics",
         "--claims-root", str(tmp_path)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "vGPU_device_memory_usage_in_bytes{" in once.stdout
    done = subprocess.run(
        [promtool(), "check", "metrics"],
        input=once.stdout,
        capture_output=True,
        text=True,
        check=False,
    )
    complaints = sorted(
        line.split()[0] for line in (done.stdout + done.stderr).splitlines() if line
    )
    assert complaints == ["vGPU_device_memory_limit_in_bytes", "vGPU_device_memory_usage_in_bytes"]
