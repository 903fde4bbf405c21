"""Build (or reuse) everything the real node of tests/node runs, outside the tracked files.

    python -m tests.node build 1.36        # prints what it built or reused, and where

- kubelet and kube-proxy: from the same pinned `k8s.io/kubernetes` module as the control plane
  (tests/controlplane/v<minor>/tools.go), cached beside it (tests.controlplane.build.build_node);
- containerd v2, ctr and the runc shim (tests/node/go/containerd), the CNI plugins bridge,
  host-local, loopback and portmap (tests/node/go/cni), the sandbox's pause program
  (tests/node/go/pause), the DRA kubelet plugin stand-in (tests/node/go/draplugin) and
  cert-manager v1.21's controller and CA injector (tests/node/go/certmanager), Volcano v1.14.1's
  scheduler and controller-manager (tests/node/go/volcano): pinned Go
  modules, go.sum committed, built with `-mod=readonly` under a key of their module files and
  sources, the Go version and the flags, in the control plane's cache folder;
- cert-manager's own Helm chart and CRDs, and Volcano's CRDs: read from the pinned modules in
  Go's module cache (`cert_manager_module`, test_volcano_on_node.volcano_module), never copied
  into this repository;
- runc, iptables, buildah, debootstrap, busybox-static and bash-static: Debian's packages
  (installed by scripts/test where missing; `DebianMissing` says which).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.controlplane.build import (
    LDFLAGS_BASE,
    Binaries,
    _build,
    _go_env,
    _key,
    _locked,
    build,
    build_node,
    cache_root,
    go,
)
from tests.controlplane.versions import Release

HERE = Path(__file__).resolve().parent
GO = HERE / "go"
CONTAINERD_VERSION = "v2.4.2"
CONTAINERD_FLAGS = (
    f"{LDFLAGS_BASE} -X github.com/containerd/containerd/v2/version.Version={CONTAINERD_VERSION}"
)
CONTAINERD_TAGS = "no_btrfs,no_devmapper,no_zfs"
# Debian's packages the node needs, by the command that tells whether each is there.
DEBIAN = {
    "runc": "runc",
    "iptables": "iptables",
    "buildah": "buildah",
    "debootstrap": "debootstrap",
    "busybox": "busybox-static",
    "bash-static": "bash-static",
    "unshare": "util-linux",
    "nsenter": "util-linux",
    "ip": "iproute2",
    # not the node's: the shells whose completion tests/migrate/test_cli_install.py runs, and
    # the Prometheus and promtool that tests/ops runs the chart's alerts with
    "zsh": "zsh",
    "fish": "fish",
    "prometheus": "prometheus",
    "promtool": "prometheus",
}


class DebianMissing(RuntimeError):
    """A Debian package the node needs is not installed."""


@dataclass(frozen=True)
class NodeBinaries:
    control_plane: Binaries  # kube-apiserver, kube-controller-manager, kube-scheduler, etcd
    node: Path  # kubelet, kube-proxy
    containerd: Path  # containerd, ctr, containerd-shim-runc-v2
    cni: Path  # bridge, host-local, loopback, portmap
    pause: Path
    plugin: Path  # hami-kubelet-plugin (the stand-in)
    device_plugin: Path  # hami-device-plugin (the legacy device plugin's stand-in)
    cert_manager: Path  # controller, cainjector (cert-manager v1.21's, wired here)
    volcano: Path  # scheduler, controller-manager (Volcano v1.14.1's own commands)
    built_seconds: float

    def path(self, command: str) -> Path:
        for folder in (self.control_plane.folder, self.node, self.containerd):
            if (folder / command).is_file():
                return folder / command
        raise FileNotFoundError(command)


def debian_missing() -> list[str]:
    return sorted({package for command, package in DEBIAN.items() if not shutil.which(command)})


def _source_key(module: Path, settings: str) -> str:
    """The control plane's key (go.mod, go.sum, Go version, flags) plus the module's own
    sources: the pause program, the plugin and cert-manager's commands are built from files in
    this repository."""
    digest = hashlib.sha256(settings.encode())
    for path in sorted(module.rglob("*")):
        if path.suffix == ".go" or path.name in ("go.mod", "go.sum"):
            name = str(path.relative_to(module))
            digest.update(name.encode() + b"\0" + path.read_bytes())
    return _key(module, digest.hexdigest())


def _module_build(name: str, packages: list[str], ldflags: str, *flags: str) -> tuple[Path, float]:
    module = GO / name
    folder = cache_root() / f"node-{name}-{_source_key(module, ' '.join((ldflags, *flags)))}"
    with _locked(cache_root() / f"node-{name}.lock"):
        seconds = _build(module, packages, ldflags, folder, *flags, cgo=False)
    return folder, seconds


def build_all(release: Release) -> NodeBinaries:
    """Everything the node of `release` runs, built on first use (raises GoMissing without Go,
    DebianMissing without Debian's packages)."""
    go()
    missing = debian_missing()
    if missing:
        raise DebianMissing(
            f"the node tests need Debian's {', '.join(missing)}: apt-get install {' '.join(missing)}"
        )
    kube = build(release)
    node, node_seconds = build_node(release)
    containerd, containerd_seconds = _module_build(
        "containerd",
        [
            "github.com/containerd/containerd/v2/cmd/containerd",
            "github.com/containerd/containerd/v2/cmd/ctr",
            "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2",
        ],
        CONTAINERD_FLAGS,
        "-tags",
        CONTAINERD_TAGS,
    )
    cni, cni_seconds = _module_build(
        "cni",
        [
            "github.com/containernetworking/plugins/plugins/main/bridge",
            "github.com/containernetworking/plugins/plugins/main/loopback",
            "github.com/containernetworking/plugins/plugins/ipam/host-local",
            "github.com/containernetworking/plugins/plugins/meta/portmap",
        ],
        LDFLAGS_BASE,
    )
    pause, pause_seconds = _module_build("pause", ["."], LDFLAGS_BASE)
    plugin, plugin_seconds = _module_build("draplugin", [".", "./deviceplugin"], LDFLAGS_BASE)
    cert_manager, cert_manager_seconds = _module_build(
        "certmanager", ["./controller", "./cainjector"], LDFLAGS_BASE
    )
    volcano, volcano_seconds = _module_build(
        "volcano",
        ["volcano.sh/volcano/cmd/scheduler", "volcano.sh/volcano/cmd/controller-manager"],
        LDFLAGS_BASE,
    )
    return NodeBinaries(
        control_plane=kube,
        node=node,
        containerd=containerd,
        cni=cni,
        pause=pause / "pause",
        plugin=plugin / "draplugin",
        device_plugin=plugin / "deviceplugin",
        cert_manager=cert_manager,
        volcano=volcano,
        built_seconds=volcano_seconds
        + kube.built_seconds
        + node_seconds
        + containerd_seconds
        + cni_seconds
        + pause_seconds
        + plugin_seconds
        + cert_manager_seconds,
    )


CERT_MANAGER_MODULE = "github.com/cert-manager/cert-manager"


VOLCANO_MODULE = "volcano.sh/volcano"


def cert_manager_module() -> Path:
    """The pinned cert-manager module's folder in Go's module cache (its chart is under
    deploy/charts/cert-manager)."""
    return pinned_module("certmanager", CERT_MANAGER_MODULE)


def volcano_module() -> Path:
    """The pinned Volcano module's folder in Go's module cache (its CRDs are under
    installer/helm/chart/volcano/crd/bases)."""
    return pinned_module("volcano", VOLCANO_MODULE)


def pinned_module(folder: str, module: str) -> Path:
    """The folder of `module`, pinned by tests/node/go/<folder>, in Go's module cache:
    downloaded by the build (or now), verified against go.sum."""
    result = subprocess.run(
        [go(), "mod", "download", "-json", module],
        cwd=GO / folder,
        env=_go_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(json.loads(result.stdout)["Dir"])
