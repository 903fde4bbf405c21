"""Build (or reuse) the real control-plane binaries for one Kubernetes release.

    python -m tests.controlplane build 1.36      # prints the folder that holds the binaries

kube-apiserver, kube-controller-manager and kube-scheduler come from `k8s.io/kubernetes` at the
version pinned in tests/controlplane/v<minor>/go.mod (go.sum committed); etcd from
`go.etcd.io/etcd/server/v3` (tests/controlplane/etcd/). Binaries are cached outside the tracked
files, in `$HAMI_DRA_CONTROLPLANE_CACHE` (default `~/.cache/hami-dra-webhook/controlplane`),
under a key made of the module files, the Go version and the build flags: a changed pin builds
anew, an unchanged one starts at once. A file lock lets parallel callers share one build.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.controlplane.versions import ETCD_VERSION, Release

HERE = Path(__file__).resolve().parent
KUBE_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
# The node of tests/node: built from the same module (its tools.go pins them) where a release has
# them, in a cache folder of its own so that the control plane alone never waits for them.
NODE_COMMANDS = ("kubelet", "kube-proxy")
LDFLAGS_BASE = "-s -w"


class GoMissing(RuntimeError):
    """No Go toolchain: the control plane cannot be built on this machine."""


@dataclass(frozen=True)
class Binaries:
    folder: Path
    etcd: Path
    built_seconds: float  # 0.0 when reused from the cache

    def path(self, command: str) -> Path:
        return self.folder / command


def cache_root() -> Path:
    configured = os.environ.get("HAMI_DRA_CONTROLPLANE_CACHE")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hami-dra-webhook" / "controlplane"


def go() -> str:
    found = shutil.which("go")
    if found is None:
        raise GoMissing(
            "Go (1.26 or later) is not on PATH: the end-to-end tests build kube-apiserver,"
            " kube-controller-manager, kube-scheduler and etcd from their Go modules"
        )
    return found


def _go_env(toolchain: str = "local") -> dict[str, str]:
    """The go command's environment. The pinned go.sum is the source of truth; the toolchain is
    the machine's own (`local`) unless a release names one, which the go command then takes
    from the Go module proxy like any module (Kubernetes 1.38 needs Go 1.27)."""
    environment = dict(os.environ)
    environment.update({"GOTOOLCHAIN": toolchain, "GOFLAGS": "-mod=readonly -buildvcs=false"})
    return environment


def _go_version(toolchain: str = "local") -> str:
    return subprocess.run(
        [go(), "version"], check=True, capture_output=True, text=True, env=_go_env(toolchain)
    ).stdout.strip()


def _key(module: Path, ldflags: str, toolchain: str = "local") -> str:
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        if (module / name).is_file():  # a module that needs nothing has no go.sum
            digest.update((module / name).read_bytes())
    digest.update(_go_version(toolchain).encode())
    digest.update(ldflags.encode())
    return digest.hexdigest()[:16]


def version_ldflags(release: Release) -> str:
    major, minor, _ = release.version.split(".", 2)  # "1.38.0-beta.0" too
    package = "k8s.io/component-base/version"
    return " ".join(
        [
            LDFLAGS_BASE,
            f"-X {package}.gitVersion=v{release.version}",
            f"-X {package}.gitMajor={major}",
            f"-X {package}.gitMinor={minor}",
            f"-X {package}.gitTreeState=clean",
        ]
    )


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _build(
    module: Path,
    packages: list[str],
    ldflags: str,
    target: Path,
    *flags: str,
    cgo: bool = True,
    toolchain: str = "local",
) -> float:
    """`go build` the packages into `target` (written whole, then renamed); returns seconds.
    `flags` go to `go build` (e.g. `-tags`); `cgo=False` builds static binaries; `toolchain` is
    GOTOOLCHAIN (see `_go_env`)."""
    if target.is_dir():
        return 0.0
    target.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".building-") as scratch:
        output = Path(scratch) / "bin"
        output.mkdir()
        command = [
            *(go(), "build", "-trimpath", *flags, "-ldflags", ldflags),
            *("-o", f"{output}/", *packages),
        ]
        environment = _go_env(toolchain)
        if not cgo:
            environment["CGO_ENABLED"] = "0"
        result = subprocess.run(
            command, cwd=module, env=environment, capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"building {' '.join(packages)} in {module} failed:\n{result.stderr[-4000:]}"
            )
        os.replace(output, target)
    return time.monotonic() - started


def build_etcd() -> tuple[Path, float]:
    module = HERE / "etcd"
    folder = cache_root() / f"etcd-v{ETCD_VERSION}-{_key(module, LDFLAGS_BASE)}"
    with _locked(cache_root() / "etcd.lock"):
        seconds = _build(module, ["."], LDFLAGS_BASE, folder)
    return folder / "etcd", seconds


def _build_kubernetes(release: Release, name: str, commands: tuple[str, ...]) -> tuple[Path, float]:
    """`commands` of k8s.io/kubernetes at `release`, cached as `<name>-v<version>-<key>`."""
    module = HERE / release.module
    ldflags = version_ldflags(release)
    key = _key(module, ldflags, release.go_toolchain)
    folder = cache_root() / f"{name}-v{release.version}-{key}"
    packages = [f"k8s.io/kubernetes/cmd/{command}" for command in commands]
    with _locked(cache_root() / f"{name}-v{release.version}.lock"):
        seconds = _build(module, packages, ldflags, folder, toolchain=release.go_toolchain)
    return folder, seconds


def build(release: Release) -> Binaries:
    """The binaries of `release`, built on first use."""
    folder, seconds = _build_kubernetes(release, "kubernetes", KUBE_COMMANDS)
    etcd, etcd_seconds = build_etcd()
    return Binaries(folder=folder, etcd=etcd, built_seconds=seconds + etcd_seconds)


def node_commands_pinned(release: Release) -> bool:
    """Whether `release`'s module pins the kubelet and kube-proxy (its tools.go names them)."""
    tools = (HERE / release.module / "tools.go").read_text()
    return all(f'"k8s.io/kubernetes/cmd/{command}"' in tools for command in NODE_COMMANDS)


def build_node(release: Release) -> tuple[Path, float]:
    """The folder holding `kubelet` and `kube-proxy` of `release`, built on first use."""
    if not node_commands_pinned(release):
        raise RuntimeError(f"tests/controlplane/{release.module}/tools.go pins no kubelet")
    return _build_kubernetes(release, "node", NODE_COMMANDS)
