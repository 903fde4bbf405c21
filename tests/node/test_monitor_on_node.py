"""The node monitor on the real node: the chart's DaemonSet runs the project's image on the real
kubelet beside the DRA plugin stand-in, which writes each prepared claim's HAMi-core region in
the documented layout (there is no GPU, so no libvgpu.so creates it). A converted legacy pod
plays the CUDA process: it fills its own slot in that region and, like libvgpu.so's rate
limiter, writes recent_kernel 2 while it is not blocked; the test plays libvgpu.so's host-PID
detection (it writes the process's host PID into the slot). A scrape of the monitor shows the
converted pod's namespace, pod and container with the region's numbers, the series go when the
pod goes, and the feedback loop switches a region alone on its card to 0 and back to 1 beside
an active peer (the fields read back from the file)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.node.conftest import NAMESPACE, RELEASE, NodeCluster
from tests.node.images import PROJECT_IMAGE
from tests.support.cluster import wait_for

pytestmark = pytest.mark.node
NODE_VERSIONS = ("1.37",)  # the monitor reads files and the API: one version shows it
MONITOR = f"{RELEASE}-monitor"
Mi = 1024 * 1024
SLOT, PROC_NUM, SWITCH, RECENT = 1856, 2008896, 2008900, 2008904

# A CUDA process as libvgpu.so would keep its slot: 32 MiB context + 512 MiB allocated on the
# claim's card, 37% SM; then the rate limiter's write of recent_kernel 2 at each launch, none
# while the field is negative (blocked).
CUDA_PROCESS = f"""
import os, struct, time
path = os.environ["CUDA_DEVICE_MEMORY_SHARED_CACHE"]
with open(path, "r+b", buffering=0) as region:
    def put(offset, form, *values):
        region.seek(offset)
        region.write(struct.pack(form, *values))
    put({SLOT}, "<i", os.getpid())
    put({SLOT} + 8, "<5Q", {32 * Mi}, 0, {512 * Mi}, 0, {544 * Mi})
    put({SLOT} + 1160 + 16, "<Q", 37)
    put({SLOT} + 1928, "<i", 1)
    put({PROC_NUM}, "<i", 1)
    print("attached", path, flush=True)
    while True:
        region.seek({RECENT})
        if struct.unpack("<i", region.read(4))[0] >= 0:
            put({RECENT}, "<i", 2)
        time.sleep(0.1)
"""


def _job(cluster: NodeCluster, namespace: str, name: str, card_uuid: str) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": {"nvidia.com/use-gpuuuid": card_uuid}},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "cuda",
                    "image": PROJECT_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["python", "-c", CUDA_PROCESS],
                    "resources": {
                        "limits": {
                            "nvidia.com/gpu": 1,
                            "nvidia.com/gpumem": 3000,
                            "nvidia.com/gpucores": 30,
                        }
                    },
                }
            ],
        },
    }
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(pod))
    wait_for(
        lambda: "attached" in cluster.kubectl("logs", "-n", namespace, name, check=False).stdout,
        f"{name} to attach to its region",
        timeout=90,
    )


def _region(cluster: NodeCluster, namespace: str, name: str) -> tuple[str, Path]:
    """The claim's UID and its region as the node's host holds it; the slot's host PID written
    as libvgpu.so's detection would (the process whose environment names the region)."""
    assert cluster.real is not None
    statuses = cluster.pod(namespace, name)["status"]["resourceClaimStatuses"]
    claim = cluster.get("resourceclaim", statuses[0]["resourceClaimName"], "-n", namespace)
    uid = claim["metadata"]["uid"]
    folder = cluster.real.folder / "host" / "usr" / "local" / "vgpu" / "claims" / uid
    (path,) = folder.glob("*.cache")
    marker = f"CUDA_DEVICE_MEMORY_SHARED_CACHE=/usr/local/vgpu/claims/{uid}/".encode()
    hostpid = wait_for(lambda: _process_with(marker), f"{name}'s process on the host")
    with path.open("r+b") as handle:
        handle.seek(SLOT + 4)
        handle.write(struct.pack("<i", hostpid))
    return uid, path


def _process_with(marker: bytes) -> int | None:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "environ").read_bytes():
                    return int(entry.name)
            except OSError:
                continue
    return None


def _fields(path: Path) -> tuple[int, int]:
    with path.open("rb") as handle:
        handle.seek(SWITCH)
        switch, recent = struct.unpack("<ii", handle.read(8))
    return recent, switch


def _scrape_text(cluster: NodeCluster) -> str:
    (pod,) = cluster.pods(NAMESPACE, "app.kubernetes.io/component=node-monitor")
    return cluster.kubectl(
        "exec", "-n", NAMESPACE, pod["metadata"]["name"], "--", "python", "-c",
        "import urllib.request;"
        "print(urllib.request.urlopen('http://127.0.0.1:9394/metrics').read().decode())",
    ).stdout  # fmt: skip


def _scrape(cluster: NodeCluster) -> list[tuple[str, dict[str, str], float]]:
    text = _scrape_text(cluster)
    return [
        (s.name, dict(s.labels), s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def _used(cluster: NodeCluster, claim_uid: str) -> list[Any]:
    return [
        s
        for s in _scrape(cluster)
        if s[0] == "hami_vgpu_memory_used_bytes" and s[1]["claim_uid"] == claim_uid
    ]


def test_the_chart_monitor_names_a_converted_pod_and_runs_the_feedback_loop(
    chart: NodeCluster, quiet_namespace: str
) -> None:
    chart.kubectl("rollout", "status", f"daemonset/{MONITOR}", "-n", NAMESPACE, "--timeout=120s")
    card = chart.node.gpus[0]
    _job(chart, quiet_namespace, "alone", card.uuid)
    claim_uid, alone = _region(chart, quiet_namespace, "alone")

    (sample,) = wait_for(lambda: _used(chart, claim_uid), "the converted pod's series", timeout=60)
    labels = sample[1]
    assert (labels["namespace"], labels["pod"], labels["container"]) == (
        quiet_namespace,
        "alone",
        "cuda",
    )
    assert (labels["device"], labels["device_uuid"], labels["pool"]) == (
        card.device_name,
        card.uuid,
        chart.node.name,
    )
    assert sample[2] == 544 * Mi
    samples = _scrape(chart)
    limit = [
        s
        for s in samples
        if s[0] == "hami_vgpu_memory_limit_bytes" and s[1]["claim_uid"] == claim_uid
    ]
    assert limit[0][2] == 3000 * Mi  # the claim's consumed memory, as the driver's env says
    util = [
        s
        for s in samples
        if s[0] == "hami_container_device_utilization_ratio" and s[1]["claim_uid"] == claim_uid
    ]
    assert util[0][2] == 37
    # kept beside the run's other files: the converted pod's series as the monitor served them
    scraped = [line for line in _scrape_text(chart).splitlines() if claim_uid in line]
    (chart.folder / "monitor-scrape.txt").write_text("\n".join(scraped) + "\n")

    # Alone on its card and active: the feedback loop switches its SM limit off.
    wait_for(
        lambda: _fields(alone)[1] == 0, "the region alone on its card to get switch 0", timeout=30
    )
    # A peer at its priority, active on the same card: both limited again.
    _job(chart, quiet_namespace, "peer", card.uuid)
    _, peer = _region(chart, quiet_namespace, "peer")
    wait_for(
        lambda: _fields(alone)[1] == 1 and _fields(peer)[1] == 1,
        "both regions to get switch 1 beside an active peer",
        timeout=30,
    )
    chart.kubectl("delete", "pod", "peer", "-n", quiet_namespace, "--wait=false")
    wait_for(lambda: _fields(alone)[1] == 0, "switch 0 once the peer is gone", timeout=60)

    chart.kubectl("delete", "pod", "alone", "-n", quiet_namespace, "--wait=false")
    wait_for(lambda: not _used(chart, claim_uid), "the series to go with the pod", timeout=60)
