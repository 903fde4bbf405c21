"""What the node may change on this machine, confined and undone.

- `NetworkNamespace`: every non-loopback address of the node side lives in a network namespace
  made here (`ip netns add`): the bridge `hami0` (10.244.0.1/24, the pod network), the route
  of the Service range onto it, the pods' veths. The namespace has no link to anything else and
  no default route, so no packet can leave it. The test process's main thread enters it with
  setns(2) (child processes inherit it) and leaves it at the end.
- `HostState`: a snapshot of what the node could leave behind in the machine's own namespaces:
  network (links, addresses, routes, iptables and nftables rules, ip_forward), mounts, the
  global sysctls the kubelet sets, top-level cgroups, named network namespaces, the mount-point
  folders the node creates. The host lease (host_lease.py) restores those sysctls.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.controlplane.build import cache_root

CLONE_NEWNET = 0x40000000
BRIDGE = "hami0"
NODE_IP = "10.244.0.1"
POD_CIDR = "10.244.0.0/24"
SERVICE_CIDR = "10.0.0.0/24"
# What the kubelet sets when protectKernelDefaults is false (k8s.io/kubernetes
# pkg/kubelet/cm/container_manager_linux.go setupKernelTunables): global, not per namespace.
KUBELET_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
CGROUP_ROOT = Path("/sys/fs/cgroup")


def _ip(*arguments: str) -> str:
    return subprocess.run(
        ["ip", *arguments], check=True, capture_output=True, text=True, timeout=30
    ).stdout


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"setns: {os.strerror(error)}")


@dataclass
class NetworkNamespace:
    name: str
    _home: int | None = None

    @property
    def path(self) -> Path:
        return Path("/run/netns") / self.name

    def create(self) -> NetworkNamespace:
        _ip("netns", "add", self.name)
        try:
            for command in (
                ("link", "set", "lo", "up"),
                ("link", "add", BRIDGE, "type", "bridge"),
                ("addr", "add", f"{NODE_IP}/24", "dev", BRIDGE),
                ("link", "set", BRIDGE, "up"),
                # A ClusterIP that kube-proxy does not translate (yet) stays on the bridge.
                ("route", "add", SERVICE_CIDR, "dev", BRIDGE, "src", NODE_IP),
            ):
                _ip("-n", self.name, *command)
        except BaseException:
            self.delete()
            raise
        return self

    def enter(self) -> None:
        """Move this thread (the test process's main thread) into the namespace."""
        self._home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        namespace = os.open(self.path, os.O_RDONLY)
        try:
            _setns(namespace)
        finally:
            os.close(namespace)

    def leave(self) -> None:
        if self._home is not None:
            _setns(self._home)
            os.close(self._home)
            self._home = None

    def delete(self) -> None:
        self.leave()
        if self.path.exists():
            subprocess.run(["ip", "netns", "del", self.name], check=False, timeout=30)

    def pids(self) -> list[int]:
        """Processes whose network namespace is this one."""
        try:
            target = os.stat(self.path).st_ino
        except FileNotFoundError:
            return []
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if (
                        os.stat(entry / "ns/net").st_ino == target
                        and int(entry.name) != os.getpid()
                    ):
                        found.append(int(entry.name))
        return found


def _run(*command: str) -> str:
    """`command` in the machine's own network namespace (PID 1's), wherever this thread is."""
    result = subprocess.run(
        ["nsenter", "--net=/proc/1/ns/net", "--", *command],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    return result.stdout if result.returncode == 0 else f"({command[0]} failed: {result.stderr})"


def _mounts() -> list[str]:
    """Every mount point of this mount namespace but buildah's: its storage mounts its own
    folder while it builds an image (tests/node/images.py), which the node run beside this
    one may be doing."""
    builder = str(cache_root() / "buildah")
    lines = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[4] == builder or fields[4].startswith(builder + "/"):
            continue
        lines.append(f"{fields[4]} {fields[-3]}")  # mount point, file-system type
    return sorted(lines)


# The test runner's own CPU group (tests/support/job_pool.py: the timed tests' priority), made
# and removed by the runner around its jobs, not by a node.
RUNNER_CGROUPS = "hami-suite-"


def _cgroups() -> list[str]:
    found = []
    for hierarchy in CGROUP_ROOT.iterdir():
        if hierarchy.is_dir() and not hierarchy.is_symlink():
            found.extend(
                str(child.relative_to(CGROUP_ROOT))
                for child in hierarchy.iterdir()
                if child.is_dir() and not child.name.startswith(RUNNER_CGROUPS)
            )
    return sorted(found)


@dataclass(frozen=True)
class HostState:
    """What the node could change in the machine's own namespaces (the network facts are read
    in PID 1's network namespace, so a test inside a node's namespace reads the machine's)."""

    facts: dict[str, str | list[str]]

    @classmethod
    def read(cls, mount_points: tuple[Path, ...]) -> HostState:
        facts: dict[str, str | list[str]] = {
            "links": _run("ip", "-o", "link", "show"),
            "addresses": _run("ip", "-o", "addr", "show"),
            "routes": _run("ip", "route", "show", "table", "all"),
            "iptables": _strip_counters(_run("iptables-save")),
            "ip6tables": _strip_counters(_run("ip6tables-save")),
            "nftables": _run("nft", "list", "ruleset"),
            "ip_forward": _run("cat", "/proc/sys/net/ipv4/ip_forward").strip(),
            "mounts": _mounts(),
            "cgroups": _cgroups(),
            "netns": sorted(p.name for p in Path("/run/netns").glob("*"))
            if Path("/run/netns").is_dir()
            else [],
            "mount points": [str(p) for p in mount_points if p.exists()],
        }
        for name in KUBELET_SYSCTLS:
            path = Path("/proc/sys") / name
            facts[f"sysctl {name}"] = path.read_text().strip() if path.exists() else "-"
        return cls(facts)

    def differences(self, later: HostState) -> dict[str, tuple[object, object]]:
        return {
            key: (value, later.facts.get(key))
            for key, value in self.facts.items()
            if later.facts.get(key) != value
        }


def _strip_counters(rules: str) -> str:
    """iptables-save output without its comment lines and packet counters."""
    lines = []
    for line in rules.splitlines():
        if line.startswith("#"):
            continue
        lines.append(line.split("[")[0].strip() if line.startswith(":") else line)
    return "\n".join(lines)
