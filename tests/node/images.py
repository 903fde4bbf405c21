"""Container images for the real node, made here without any registry.

- `oci_archive`: a root filesystem folder packed into an OCI image-layout tar (one gzip layer,
  PAX, mtime 0), named by the `io.containerd.image.name` annotation so that `ctr images import`
  and `buildah pull oci-archive:` take it under that name.
- The test image: Debian's busybox-static with one link per applet, Debian's bash-static as
  /bin/bash (HAMi's examples run `bash -c ...`), and an `nvidia-smi` STAND-IN script that
  prints what the GPU environment of the container is (there is no GPU here). It is imported
  under every image name the applied manifests use, so nothing is ever pulled.
- The pause image (the CRI sandbox) and the DRA plugin stand-in's image (the test image plus
  `hami-kubelet-plugin`, the two scripts the chart's DaemonSet runs, and stand-in files for
  HAMi-core's libvgpu.so and ld.so.preload).
- cert-manager's controller and CA injector images: each one static binary
  (tests/node/go/certmanager) and a numeric non-root user, as cert-manager's chart requires
  (runAsNonRoot without runAsUser).
- A Python 3.11 base from Debian bookworm (`debootstrap`), cached as an archive; the project's
  image built FROM IT by `buildah` from the repository's Dockerfile as it ships (only
  `--build-arg BASE=` is given), with buildah's layer cache in the cache folder.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.controlplane.build import _locked, cache_root

ROOT = Path(__file__).resolve().parents[2]
PYTHON_BASE = "localhost/python:3.11-bookworm"
PROJECT_IMAGE = "localhost/hami-dra-webhook:node-test"
# The chart and image as they landed before the staged migration (chart 0.1.0): the upgrade
# test (tests/node/test_staged_upgrade.py) installs them and upgrades to this checkout.
PREVIOUS_COMMIT = "90a9c3d53c8cb6463d7ecc6c62f87edff9abac45"
PREVIOUS_IMAGE = "localhost/hami-dra-webhook:previous"
TEST_IMAGE = "localhost/node-test/shell:v1"
PAUSE_IMAGE = "localhost/node-test/pause:v1"
PLUGIN_IMAGE = "localhost/node-test/hami-kubelet-plugin:v1"
CERT_MANAGER_VERSION = "v1.21.2"  # tests/node/go/certmanager/go.mod
CERT_MANAGER_IMAGES = {
    command: f"localhost/node-test/cert-manager-{command}:{CERT_MANAGER_VERSION}"
    for command in ("controller", "cainjector")
}
# Bump to make the base anew (its packages come from Debian's archive at that time).
PYTHON_BASE_REVISION = "bookworm-python3.11-1"

NVIDIA_SMI = """#!/bin/sh
# STAND-IN for nvidia-smi (the test node has no GPU): prints the GPU environment that the
# DRA driver's CDI spec gave this container, then exits 0.
echo "stand-in nvidia-smi: no GPU on this test node"
env | grep -E '^(CUDA_|NVIDIA_VISIBLE_DEVICES|GPU_CORE|LIBCUDA)' | sort
exit 0
"""

PRESTART = """#!/bin/bash
# STAND-IN for the HAMi DRA driver image's kubelet-plugin-prestart.sh: the real one waits for
# the NVIDIA driver under NVIDIA_DRIVER_ROOT; this one checks that the root is mounted.
set -e
test -d /driver-root-parent
mkdir -p "$KUBELET_REGISTRAR_DIRECTORY_PATH" "$KUBELET_PLUGINS_DIRECTORY_PATH" 2>/dev/null || true
echo "prestart: driver root mounted"
"""

VGPU_INIT = """#!/bin/bash
# STAND-IN for the HAMi DRA driver image's vgpu-init.sh: installs HAMi-core's files into the
# host directory it is given (here harmless stand-ins of libvgpu.so and ld.so.preload).
set -e
target="${1:?usage: vgpu-init.sh DIR}"
mkdir -p "$target"
cp /usr/local/lib/hami/libvgpu.so "$target/libvgpu.so"
cp /usr/local/lib/hami/ld.so.preload "$target/ld.so.preload"
"""


class ImageBuildFailed(RuntimeError):
    pass


def _run(command: list[str], what: str, timeout: float = 1800, **kwargs: Any) -> str:
    result = subprocess.run(
        command, capture_output=True, text=True, check=False, timeout=timeout, **kwargs
    )
    if result.returncode != 0:
        raise ImageBuildFailed(
            f"{what} failed ({result.returncode}): {' '.join(command)}\n"
            f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
    return result.stdout


def _tar_layer(rootfs: Path) -> bytes:
    """The folder as a gzip'd tar, sorted, mtime 0, owners as on disk."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(rootfs.rglob("*")):
            info = tar.gettarinfo(str(path), arcname=str(path.relative_to(rootfs)))
            info.mtime = 0
            info.uname = info.gname = ""
            if info.isfile():
                with path.open("rb") as handle:
                    tar.addfile(info, handle)
            else:
                tar.addfile(info)
    return gzip.compress(raw.getvalue(), compresslevel=1, mtime=0)


def oci_archive(
    rootfs: Path, target: Path, name: str, config: dict[str, Any] | None = None
) -> Path:
    """Pack `rootfs` into an OCI image-layout tar at `target`, named `name`."""
    layer = _tar_layer(rootfs)
    diff_id = hashlib.sha256(gzip.decompress(layer)).hexdigest()
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]}
        | (config or {}),
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
        "history": [{"created_by": "tests/node/images.py"}],
    }
    blobs: dict[str, bytes] = {}

    def blob(data: bytes) -> dict[str, Any]:
        digest = hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return {"digest": f"sha256:{digest}", "size": len(data)}

    config_bytes = json.dumps(image_config, sort_keys=True).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **blob(config_bytes)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", **blob(layer)}],
    }
    manifest_descriptor = {
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        **blob(json.dumps(manifest, sort_keys=True).encode()),
        "annotations": {
            "io.containerd.image.name": name,
            "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1],
        },
    }
    index = {"schemaVersion": 2, "manifests": [manifest_descriptor]}
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".part")
    with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:

        def add(arcname: str, data: bytes) -> None:
            info = tarfile.TarInfo(arcname)
            info.size, info.mtime = len(data), 0
            tar.addfile(info, io.BytesIO(data))

        add("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        add("index.json", json.dumps(index).encode())
        for digest, data in blobs.items():
            add(f"blobs/sha256/{digest}", data)
    os.replace(partial, target)
    return target


def _write(path: Path, text: str, mode: int = 0o755) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def shell_rootfs(folder: Path) -> Path:
    """busybox (every applet linked into /bin), bash, /etc/passwd, /etc/group, /tmp."""
    busybox = Path(shutil.which("busybox") or "/bin/busybox")
    (folder / "bin").mkdir(parents=True)
    shutil.copy2(busybox, folder / "bin" / "busybox")
    applets = _run([str(busybox), "--list"], "busybox --list").split()
    for applet in applets:
        if applet != "busybox" and not (folder / "bin" / applet).exists():
            (folder / "bin" / applet).symlink_to("busybox")
    shutil.copy2(shutil.which("bash-static") or "/bin/bash-static", folder / "bin" / "bash")
    for link in ("usr/bin", "usr/sbin", "sbin"):
        (folder / link).parent.mkdir(parents=True, exist_ok=True)
        (folder / link).symlink_to("/bin")
    _write(
        folder / "etc/passwd",
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/sh\n",
        0o644,
    )
    _write(folder / "etc/group", "root:x:0:\nnogroup:x:65534:\n", 0o644)
    (folder / "tmp").mkdir(mode=0o1777)
    (folder / "tmp").chmod(0o1777)
    (folder / "root").mkdir()
    _write(folder / "bin" / "nvidia-smi", NVIDIA_SMI)
    # HAMi's example.yaml loops over the CUDA sample: a stand-in that reports and pauses.
    _write(folder / "cuda-samples" / "vectorAdd", NVIDIA_SMI.replace("exit 0", "sleep 5"))
    return folder


@dataclass(frozen=True)
class LocalImages:
    """The archives to import into containerd, and the names each one is imported under."""

    archives: dict[Path, tuple[str, ...]]
    project_build_seconds: float


def _shell_archive(scratch: Path, names: Iterable[str]) -> dict[Path, tuple[str, ...]]:
    rootfs = shell_rootfs(scratch / "shell-rootfs")
    archive = oci_archive(
        rootfs, scratch / "shell.tar", TEST_IMAGE, {"Cmd": ["sh", "-c", "sleep 3600"]}
    )
    return {archive: (TEST_IMAGE, *sorted(set(names) - {TEST_IMAGE}))}


def _pause_archive(scratch: Path, pause: Path) -> Path:
    rootfs = scratch / "pause-rootfs"
    rootfs.mkdir()
    shutil.copy2(pause, rootfs / "pause")
    return oci_archive(rootfs, scratch / "pause.tar", PAUSE_IMAGE, {"Entrypoint": ["/pause"]})


def _plugin_archive(scratch: Path, plugin: Path) -> Path:
    rootfs = shell_rootfs(scratch / "plugin-rootfs")
    shutil.copy2(plugin, rootfs / "bin" / "hami-kubelet-plugin")
    # The legacy device plugin's stand-in (tests/node/go/draplugin/deviceplugin), built beside.
    shutil.copy2(plugin.parent / "deviceplugin", rootfs / "bin" / "hami-device-plugin")
    _write(rootfs / "bin" / "kubelet-plugin-prestart.sh", PRESTART)
    _write(rootfs / "bin" / "vgpu-init.sh", VGPU_INIT)
    _write(
        rootfs / "usr/local/lib/hami/libvgpu.so",
        "stand-in for HAMi-core's libvgpu.so: not a library, never loaded\n",
        0o644,
    )
    # An empty preload list: the dynamic loader of a container that gets it preloads nothing.
    _write(rootfs / "usr/local/lib/hami/ld.so.preload", "", 0o644)
    return oci_archive(
        rootfs, scratch / "plugin.tar", PLUGIN_IMAGE, {"Entrypoint": ["hami-kubelet-plugin"]}
    )


def _cert_manager_archives(scratch: Path, commands: Path) -> dict[Path, tuple[str, ...]]:
    archives: dict[Path, tuple[str, ...]] = {}
    for command, name in CERT_MANAGER_IMAGES.items():
        rootfs = scratch / f"cert-manager-{command}-rootfs"
        rootfs.mkdir()
        shutil.copy2(commands / command, rootfs / f"cert-manager-{command}")
        (rootfs / "tmp").mkdir(mode=0o1777)
        config = {"Entrypoint": [f"/cert-manager-{command}"], "User": "1000:1000"}
        archives[oci_archive(rootfs, scratch / f"cert-manager-{command}.tar", name, config)] = (
            name,
        )
    return archives


def python_base() -> Path:
    """An OCI archive of Debian bookworm with python3.11 and venv, made once (debootstrap)."""
    folder = cache_root() / f"python-base-{PYTHON_BASE_REVISION}"
    archive = folder / "python-base.tar"
    with _locked(cache_root() / "python-base.lock"):
        if archive.is_file():
            return archive
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder) as scratch:
            rootfs = Path(scratch) / "rootfs"
            _run(
                [
                    "debootstrap",
                    "--variant=minbase",
                    "--include=python3,python3-venv,python-is-python3,ca-certificates",
                    "bookworm",
                    str(rootfs),
                    "http://deb.debian.org/debian",
                ],
                "debootstrap of the Python base",
                timeout=2400,
            )
            for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
                for entry in (rootfs / cache).glob("*"):
                    if entry.is_file():
                        entry.unlink()
            # pip inside the build reaches PyPI through this machine's egress, whose CA may be
            # only in the host's bundle.
            host_bundle = Path("/etc/ssl/certs/ca-certificates.crt")
            if host_bundle.is_file():
                shutil.copy2(host_bundle, rootfs / "etc/ssl/certs/ca-certificates.crt")
            oci_archive(rootfs, archive, PYTHON_BASE, {"Cmd": ["python3"]})
    return archive


def _buildah(*arguments: str) -> list[str]:
    storage = cache_root() / "buildah"
    return [
        "buildah",
        "--root",
        str(storage / "root"),
        "--runroot",
        str(storage / "run"),
        "--storage-driver",
        "overlay",
        *arguments,
    ]


def previous_source(scratch: Path) -> Path:
    """PREVIOUS_COMMIT's tree (chart, Dockerfile, package), from this repository's history."""
    folder = scratch / "previous-source"
    if not folder.is_dir():
        folder.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", PREVIOUS_COMMIT],
            capture_output=True,
            check=False,
        )
        if archive.returncode != 0:
            raise RuntimeError(
                f"commit {PREVIOUS_COMMIT} is not in this clone's history (a shallow clone?):"
                f" {archive.stderr.decode(errors='replace')}"
            )
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
        _as_checked_out(folder)
    return folder


# What the image's dependency layer is made from (the Dockerfile's first COPY).
DEPENDENCY_INPUTS = ("requirements.lock", "requirements-build.lock")


def _as_checked_out(folder: Path) -> None:
    """Give the previous tree's dependency inputs this checkout's file modes, so that its build
    takes the dependency layer from buildah's cache, as `previous_image` relies on. buildah keys
    a COPY's layer by the files' modes too, and `git archive` writes 0664 (its tar.umask, 002)
    where a checkout under umask 022 has 0644: with the key different, the build went on to
    fetch every wheel from inside the test network namespace, where there is no network, and
    failed ("Temporary failure in name resolution") on any machine whose cache did not
    already hold a layer of the archive's own modes."""
    for name in DEPENDENCY_INPUTS:
        previous, current = folder / name, ROOT / name
        if previous.read_bytes() != current.read_bytes():
            raise ImageBuildFailed(
                f"{name} at {PREVIOUS_COMMIT} differs from this checkout's: the previous image's"
                " dependency layer is then not in buildah's cache, and the test network"
                " namespace cannot fetch it. Build the previous image outside the namespace"
                " (tests/node/images.py: previous_image) before changing the lock files."
            )
        previous.chmod(current.stat().st_mode & 0o7777)


def project_image(
    scratch: Path, source: Path = ROOT, name: str = PROJECT_IMAGE
) -> tuple[Path, float]:
    """The project's image, built from the Dockerfile as it ships in `source`, as an OCI
    archive named `name`."""
    base = python_base()
    started = time.monotonic()
    with _locked(cache_root() / "buildah.lock"):
        _run(_buildah("pull", "-q", f"oci-archive:{base}"), "buildah pull of the Python base")
        _run(
            _buildah(
                "build",
                "--isolation",
                "chroot",
                "--network",
                "host",
                "--layers",
                "--pull=never",
                "--build-arg",
                f"BASE={PYTHON_BASE}",
                "-t",
                name,
                "-f",
                "Dockerfile",
                ".",
            ),
            "buildah build of the project's Dockerfile",
            cwd=source,
        )
        archive = scratch / f"project-{name.rsplit(':', 1)[-1]}.tar"
        _pushed_once(name, archive)
    return archive, time.monotonic() - started


KEPT_ARCHIVES = 4  # the newest pushed archives kept in the cache (117 MB each)


def _pushed_once(name: str, archive: Path) -> None:
    """`archive`: the built image `name` as an OCI archive, pushed once an image. buildah's
    image ID is the digest of the image's config, which names every layer's digest: the same
    ID is the same image, so an archive pushed for it before (another node cluster of the run,
    or an earlier run of the same tree) is taken as it is instead of compressing ~117 MB of
    layers again (about 5 s of CPU a push)."""
    image_id = _run(
        _buildah("images", "--noheading", "--no-trunc", "--format", "{{.ID}}", name),
        "buildah images of the project's image",
    ).split()[0]
    folder = cache_root() / "pushed"
    folder.mkdir(parents=True, exist_ok=True)
    digest, tag = image_id.removeprefix("sha256:")[:40], hashlib.sha256(name.encode()).hexdigest()
    kept = folder / f"{digest}-{tag[:12]}.tar"  # the archive names the image: one per name too
    if not kept.is_file():
        part = kept.with_suffix(f".{os.getpid()}.part")
        _run(
            _buildah("push", "-q", name, f"oci-archive:{part}:{name}"),
            "buildah push of the project's image",
        )
        part.replace(kept)
        for old in sorted(folder.glob("*.tar"), key=lambda p: p.stat().st_mtime)[:-KEPT_ARCHIVES]:
            old.unlink(missing_ok=True)
    kept.touch()  # the newest used is kept longest
    try:
        os.link(kept, archive)
    except OSError:
        shutil.copyfile(kept, archive)


def local_images(
    scratch: Path,
    pause: Path,
    plugin: Path,
    cert_manager: Path,
    names: Iterable[str],
) -> LocalImages:
    """Every image the node runs, as archives in `scratch` (the project's built anew)."""
    scratch.mkdir(parents=True, exist_ok=True)
    archives = _shell_archive(scratch, names)
    archives[_pause_archive(scratch, pause)] = (PAUSE_IMAGE,)
    archives[_plugin_archive(scratch, plugin)] = (PLUGIN_IMAGE,)
    archives.update(_cert_manager_archives(scratch, cert_manager))
    project, seconds = project_image(scratch)
    archives[project] = (PROJECT_IMAGE,)
    return LocalImages(archives, seconds)


def previous_image(scratch: Path) -> LocalImages:
    """PREVIOUS_COMMIT's image, built from its tree. Its dependency layer is the one the
    current image's build left in buildah's cache (the same lock files, given this checkout's
    modes by `previous_source`), so no network is needed: it can be built from inside the test
    network namespace."""
    archive, seconds = project_image(scratch, previous_source(scratch), PREVIOUS_IMAGE)
    return LocalImages({archive: (PREVIOUS_IMAGE,)}, seconds)
