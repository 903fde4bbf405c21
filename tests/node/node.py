"""A real Kubernetes node for the tests: containerd v2 (runc, CDI on), the kubelet and
kube-proxy, with the CNI bridge, joined to the project's control plane, all confined.

Confinement (see tests/node/host.py): the control plane and the node run in a network namespace
made for the run. The node's processes also share a private mount namespace (held by one
`unshare` process), in which /var/lib/kubelet, /var/run/cdi, /usr/local/vgpu and /tmp/vgpulock,
the host paths that the chart's driver DaemonSet mounts, are the run's own folders, so every
mount that containerd, runc and the kubelet make lives there and goes with it. Pods run under
a cgroup root of the run's own (`/<node name>-<pid>` in every cgroup v1 hierarchy). `stop()`
kills every process it started and everything left in those namespaces and cgroups, by PID,
and removes the cgroups. The mount-point folders and the kernel settings the kubelet changes
are shared by every node on the machine: the host lease (tests/node/host_lease.py) makes and
restores them.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.controlplane.cluster import ControlPlane, Process
from tests.node.build import NodeBinaries
from tests.node.host import (
    BRIDGE,
    CGROUP_ROOT,
    NODE_IP,
    POD_CIDR,
)
from tests.node.images import PAUSE_IMAGE, LocalImages

# The host paths the chart's driver DaemonSet (and the kubelet) use, bound in the node's mount
# namespace to folders of the run.
BOUND_PATHS = (
    Path("/var/lib/kubelet"),
    Path("/var/run/cdi"),
    Path("/usr/local/vgpu"),
    Path("/tmp/vgpulock"),
)
KUBELET_ROOT = BOUND_PATHS[0]
CDI_DIR = BOUND_PATHS[1]


class NodeError(RuntimeError):
    pass


@dataclass
class RealNode:
    plane: ControlPlane
    binaries: NodeBinaries
    folder: Path
    name: str = "node-1"
    # A second node shares the network namespace: its own kubelet ports, its own share of the
    # pod addresses, and no kube-proxy of its own (the first one's rules serve the namespace).
    kubelet_port: int = 10250
    healthz_port: int = 10248
    pod_ips: tuple[str, str] = ("10.244.0.2", "10.244.0.254")
    kube_proxy: bool = True
    labels: tuple[str, ...] = ()  # more --node-labels, e.g. "hami.io/gpu-pool=legacy"
    taints: tuple[str, ...] = ()  # --register-with-taints, e.g. "nvidia.com/gpu=present:NoSchedule"
    processes: list[Process] = field(default_factory=list)
    _holder: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        self.cgroup_root = f"/{self.name}-{os.getpid()}"
        self.containerd_socket = self.folder / "containerd" / "containerd.sock"

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, images: LocalImages) -> RealNode:
        atexit.register(self.stop)  # an interrupted run still stops the node
        try:
            self._make_cgroup_root()
            self._start_mount_namespace()
            self._start_containerd()
            self.import_images(images)
            self._start_kubelet()
            if self.kube_proxy:
                self._start_kube_proxy()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop everything, whatever state it is in; leave nothing behind."""
        for process in reversed(self.processes):
            process.stop(grace=15)
        self.processes.clear()
        self._kill_leftovers()
        if self._holder is not None:
            with contextlib.suppress(ProcessLookupError):
                self._holder.kill()
            self._holder.wait()
            self._holder = None
        self._remove_cgroups()
        atexit.unregister(self.stop)

    # -- the pieces --------------------------------------------------------------------------

    def _hierarchies(self) -> list[Path]:
        """Every cgroup hierarchy: the v1 ones, and cgroup v2 at `unified` on a hybrid machine
        (runc makes the pod groups there too)."""
        return [
            path
            for path in sorted(CGROUP_ROOT.iterdir())
            if path.is_dir() and not path.is_symlink()
        ]

    def _make_cgroup_root(self) -> None:
        for hierarchy in self._hierarchies():
            if (hierarchy / "cgroup.controllers").exists() and hierarchy != CGROUP_ROOT:
                continue  # cgroup v2 beside v1: the kubelet's cgroup root is a v1 one
            folder = hierarchy / self.cgroup_root.lstrip("/")
            folder.mkdir(exist_ok=True)
            if hierarchy.name == "cpuset":  # v1 cpuset: a new group starts with no CPUs
                for name in ("cpuset.cpus", "cpuset.mems"):
                    (folder / name).write_text((hierarchy / name).read_text())

    def _cgroup_pids(self) -> set[int]:
        pids: set[int] = set()
        for hierarchy in self._hierarchies():
            root = hierarchy / self.cgroup_root.lstrip("/")
            if root.is_dir():
                for procs in root.rglob("cgroup.procs"):
                    with contextlib.suppress(OSError):
                        pids.update(int(line) for line in procs.read_text().split())
        return pids

    def _remove_cgroups(self) -> None:
        for hierarchy in self._hierarchies():
            root = hierarchy / self.cgroup_root.lstrip("/")
            if not root.is_dir():
                continue
            folders = sorted(
                (path for path in root.rglob("*") if path.is_dir()),
                key=lambda path: len(path.parts),
                reverse=True,
            )
            for folder in [*folders, root]:
                for _ in range(50):
                    try:
                        folder.rmdir()
                        break
                    except FileNotFoundError:
                        break
                    except OSError:
                        time.sleep(0.1)

    def _mount_namespace_pids(self) -> set[int]:
        if self._holder is None:
            return set()
        try:
            target = os.stat(f"/proc/{self._holder.pid}/ns/mnt").st_ino
        except OSError:
            return set()
        found = set()
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != self._holder.pid:
                with contextlib.suppress(OSError):
                    if os.stat(entry / "ns/mnt").st_ino == target:
                        found.add(int(entry.name))
        return found

    def _kill_leftovers(self) -> None:
        """containerd's shims outlive it, containers live in their own namespaces: kill what
        is left in the node's cgroups and mount namespace."""
        for _ in range(20):
            pids = self._cgroup_pids() | self._mount_namespace_pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.25)
        raise NodeError(f"processes of the node survive SIGKILL: {sorted(pids)}")

    def _start_mount_namespace(self) -> None:
        commands = ["mount --make-rshared /"]
        for path in BOUND_PATHS:
            own = self.folder / "host" / path.relative_to("/")
            own.mkdir(parents=True, exist_ok=True)
            real = path.resolve()
            if not real.is_dir():
                raise NodeError(f"{real} is missing: the host lease makes it (host_lease.py)")
            commands.append(f"mount --bind {own} {real}")
        script = " && ".join(commands) + " && echo ready && exec sleep 2147483647"
        self._holder = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        assert self._holder.stdout is not None
        line = self._holder.stdout.readline()
        self._holder.stdout.close()
        if line.strip() != b"ready":
            raise NodeError(f"the node's mount namespace did not start: {line!r}")

    def _in_node(self, command: list[str]) -> list[str]:
        assert self._holder is not None
        return ["nsenter", f"--target={self._holder.pid}", "--mount", "--", *command]

    def _spawn(self, name: str, command: list[str], env: dict[str, str] | None = None) -> Process:
        log_path = self.folder / f"{name}.log"
        log_file = log_path.open("ab")
        popen = subprocess.Popen(
            self._in_node(command),
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.folder,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
        process = Process(name, popen, log_path, log_file)
        self.processes.append(process)
        return process

    def _wait(self, process: Process, check: Any, what: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.popen.poll() is not None:
                raise NodeError(
                    f"{process.name} exited ({process.popen.returncode}):\n{process.tail()}"
                )
            with contextlib.suppress(Exception):
                if check():
                    return
            time.sleep(0.25)
        raise NodeError(f"{what}: not within {timeout:.0f} s:\n{process.tail()}")

    def _path_env(self) -> dict[str, str]:
        return {"PATH": f"{self.binaries.containerd}:{os.environ.get('PATH', '/usr/bin:/bin')}"}

    def _start_containerd(self) -> None:
        base = self.folder / "containerd"
        base.mkdir(parents=True, exist_ok=True)
        cni = self.folder / "cni"
        (cni / "net.d").mkdir(parents=True, exist_ok=True)
        conflist = {
            "cniVersion": "1.0.0",
            "name": "node-test",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [
                            [
                                {
                                    "subnet": POD_CIDR,
                                    "gateway": NODE_IP,
                                    "rangeStart": self.pod_ips[0],
                                    "rangeEnd": self.pod_ips[1],
                                }
                            ]
                        ],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(cni / "ipam"),
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        }
        (cni / "net.d" / "10-node-test.conflist").write_text(json.dumps(conflist, indent=1))
        config = f"""version = 3
root = "{base}/root"
state = "{base}/state"
[grpc]
  address = "{self.containerd_socket}"
[ttrpc]
  address = "{self.containerd_socket}.ttrpc"
[plugins]
  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "{PAUSE_IMAGE}"
  [plugins.'io.containerd.cri.v1.runtime']
    cdi_spec_dirs = ["{CDI_DIR}"]
    # This VM takes CAP_SYS_RESOURCE from root: runc cannot lower oom_score_adj below
    # containerd's own (every pod sandbox asks for -998).
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = "/usr/sbin/runc"
          Root = "{base}/runc"
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["{self.binaries.cni}"]
      conf_dir = "{cni / "net.d"}"
"""
        (base / "config.toml").write_text(config)
        process = self._spawn(
            "containerd",
            [str(self.binaries.path("containerd")), "--config", str(base / "config.toml")],
            env=self._path_env(),
        )
        self._wait(process, lambda: self.ctr("version").returncode == 0, "containerd answering")

    def ctr(self, *arguments: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self._in_node(
                [
                    str(self.binaries.path("ctr")),
                    "--address",
                    str(self.containerd_socket),
                    "--namespace",
                    "k8s.io",
                    *arguments,
                ]
            ),
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )

    def import_images(self, images: LocalImages) -> None:
        for archive, names in images.archives.items():
            result = self.ctr("images", "import", str(archive))
            if result.returncode != 0:
                raise NodeError(f"ctr images import {archive}: {result.stderr}")
            for extra in names[1:]:
                tagged = self.ctr("images", "tag", "--force", names[0], extra)
                if tagged.returncode != 0:
                    raise NodeError(f"ctr images tag {names[0]} {extra}: {tagged.stderr}")

    def _start_kubelet(self) -> None:
        base = self.folder / "kubelet"
        (base / "pki").mkdir(parents=True, exist_ok=True)
        # Files named after the node: a second node's must not replace the first one's (a
        # restarted kubelet reads them again).
        pair = self.plane.pki.issue(
            f"node-{self.name}", f"system:node:{self.name}", organization="system:nodes"
        )
        kubeconfig = self.plane.kubeconfig(f"node-{self.name}", pair)
        (base / "resolv.conf").write_text("nameserver 127.0.0.1\n")
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": NODE_IP,
            "port": self.kubelet_port,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": self.healthz_port,
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.cgroup_root,
            "failCgroupV1": False,
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            "imageServiceEndpoint": f"unix://{self.containerd_socket}",
            "failSwapOn": False,
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(self.plane.pki.ca)},
            },
            "authorization": {"mode": "Webhook"},
            "clusterDNS": [],
            "resolvConf": str(base / "resolv.conf"),
            "podLogsDir": str(base / "pod-logs"),
            "enforceNodeAllocatable": [],
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
                "nodefs.inodesFree": "1%",
            },
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "imageMinimumGCAge": "87600h",
            "maxPods": 40,
            "makeIPTablesUtilChains": False,
            "protectKernelDefaults": False,
            "serializeImagePulls": False,
            "nodeStatusUpdateFrequency": "2s",
            "syncFrequency": "5s",
        }
        (base / "config.yaml").write_text(json.dumps(config, indent=1))
        self._kubelet_command = [
            str(self.binaries.path("kubelet")),
            f"--config={base / 'config.yaml'}",
            f"--kubeconfig={kubeconfig}",
            f"--root-dir={KUBELET_ROOT}",
            f"--cert-dir={base / 'pki'}",
            f"--hostname-override={self.name}",
            f"--node-ip={NODE_IP}",
            # What GPU feature discovery labels a GPU node with: the driver goes there.
            "--node-labels=" + ",".join(("nvidia.com/gpu.present=true", *self.labels)),
            *([f"--register-with-taints={','.join(self.taints)}"] if self.taints else []),
            "--v=2",
        ]
        self.kubelet = self._spawn("kubelet", self._kubelet_command, env=self._path_env())
        self.wait_ready()

    def restart_kubelet(self) -> None:
        """Stop the kubelet (SIGTERM) and start it again with the same configuration."""
        self.kubelet.stop()
        self.processes.remove(self.kubelet)
        self.kubelet = self._spawn("kubelet", self._kubelet_command, env=self._path_env())
        self.wait_ready()

    def node_object(self) -> dict[str, Any] | None:
        status, body = self.plane.request("GET", f"/api/v1/nodes/{self.name}")
        return body if status == 200 else None

    def ready(self) -> bool:
        node = self.node_object()
        if node is None:
            return False
        conditions = {c["type"]: c["status"] for c in node["status"].get("conditions", [])}
        own = {taint.split("=")[0].split(":")[0] for taint in self.taints}
        taints = [t["key"] for t in node["spec"].get("taints", []) if t["key"] not in own]
        return conditions.get("Ready") == "True" and not taints

    def wait_ready(self, timeout: float = 120) -> None:
        self._wait(self.kubelet, self.ready, f"node {self.name} Ready and untainted", timeout)

    def _start_kube_proxy(self) -> None:
        base = self.folder / "kube-proxy"
        base.mkdir(parents=True, exist_ok=True)
        kubeconfig = self.plane.kubeconfig(
            "kube-proxy", self.plane.pki.issue("kube-proxy", "system:kube-proxy")
        )
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig)},
            "hostnameOverride": self.name,
            "mode": "iptables",
            "clusterCIDR": POD_CIDR,
            "bindAddress": NODE_IP,
            "healthzBindAddress": "127.0.0.1:10256",
            "metricsBindAddress": "127.0.0.1:10249",
            "nodePortAddresses": [f"{NODE_IP}/32"],
            "iptables": {"localhostNodePorts": False},
            # Touch no conntrack sysctl.
            "conntrack": {
                "maxPerCore": 0,
                "min": 0,
                "tcpEstablishedTimeout": "0s",
                "tcpCloseWaitTimeout": "0s",
            },
        }
        (base / "config.yaml").write_text(json.dumps(config, indent=1))
        process = self._spawn(
            "kube-proxy",
            [str(self.binaries.path("kube-proxy")), f"--config={base / 'config.yaml'}", "--v=1"],
        )
        self._wait(process, _kube_proxy_healthy, "kube-proxy healthy", timeout=60)

    def logs(self) -> str:
        return "\n".join(f"== {p.name}\n{p.tail(2000)}" for p in self.processes)


def _kube_proxy_healthy() -> bool:
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", 10256, timeout=2)
    try:
        connection.request("GET", "/healthz")
        answer = connection.getresponse()
        answer.read()
        return answer.status == 200
    finally:
        connection.close()
