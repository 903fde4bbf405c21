"""The node leaves this machine as it found it: a node of its own is started, runs a pod with
a DRA claim (so that the kubelet, containerd, runc, the CNI bridge and kube-proxy all leave
their marks), and is stopped; every fact HostState reads is then as before, and no process of
it is left. Another process's nodes may come and go meanwhile (the default run has two node
runs at once): the host lease's `changes` leaves out what is theirs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.node.conftest import confined_cluster, node_versions
from tests.node.host_lease import HostLease, changes
from tests.node.images import LocalImages
from tests.node.node import BOUND_PATHS
from tests.support.cluster import wait_for

pytestmark = pytest.mark.node  # the real node: runs beside the quiet tests


def _our_processes(folder: Path) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if str(folder) in command:
                found.append(command)
    return found


def test_the_machine_is_as_before_after_a_node(node_images: LocalImages, tmp_path: Path) -> None:
    node_minor = node_versions()[0]  # once a run: the same fixture code serves every version
    lease = HostLease(BOUND_PATHS)
    before = lease.look()
    with confined_cluster(node_minor, tmp_path, node_images, node_name="node-restore") as cluster:
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "marks"},
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "c",
                        "image": "docker.io/library/ubuntu:22.04",
                        "command": ["sh", "-c", "sleep 600"],
                    }
                ],
            },
        }
        cluster.kubectl("apply", "-n", "default", "-f", "-", stdin=json.dumps(pod))
        wait_for(
            lambda: cluster.pod("default", "marks")["status"].get("phase") == "Running",
            "a pod running",
            timeout=120,
        )
        during = lease.look()
        assert changes(before, during), "a running node must show on the machine (mounts, cgroups)"
    assert changes(before, lease.look()) == {}
    assert _our_processes(tmp_path) == []
