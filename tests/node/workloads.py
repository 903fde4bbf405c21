"""The manifests the node tests apply unchanged, and reading what their containers saw.

HAMi's own examples are read from ../shared/hami-examples (never copied here); the images they
name are the local test image under the same names (tests/node/images.py), so nothing is pulled.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from tests.support import pods

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
HAMI_NVIDIA = ROOT.parent / "shared" / "hami-examples" / "nvidia"
GPU_ENV = re.compile(r"^(CUDA_DEVICE_\w+|NVIDIA_VISIBLE_DEVICES)=(.*)$")


def full_image_name(name: str) -> str:
    """The name containerd's CRI resolves `name` to (docker.io/library/... for short names)."""
    reference = name.strip()
    first, _, rest = reference.partition("/")
    if not rest:
        reference = f"docker.io/library/{reference}"
    elif "." not in first and ":" not in first and first != "localhost":
        reference = f"docker.io/{reference}"
    last = reference.rsplit("/", 1)[-1]
    if ":" not in last and "@" not in last:
        reference += ":latest"
    return reference


def _images_of(document: Any) -> list[str]:
    found: list[str] = []
    if isinstance(document, dict):
        for key, value in document.items():
            if key == "image" and isinstance(value, str):
                found.append(value)
            else:
                found += _images_of(value)
    elif isinstance(document, list):
        for item in document:
            found += _images_of(item)
    return found


def _manifest_files() -> list[Path]:
    files = sorted(EXAMPLES.glob("*.yaml"))
    if HAMI_NVIDIA.is_dir():
        files += sorted(HAMI_NVIDIA.glob("*.yaml"))
    return files


def image_names() -> tuple[str, ...]:
    """Every image the manifests name, fully qualified (digest references cannot be tagged)."""
    names = set()
    for path in _manifest_files():
        for document in yaml.safe_load_all(path.read_text()):
            names.update(
                full_image_name(image) for image in _images_of(document) if "@" not in image
            )
    return tuple(sorted(names))


IMAGE_NAMES = image_names()


def gpu_env(text: str) -> dict[str, str]:
    """The GPU variables (CUDA_DEVICE_*, NVIDIA_VISIBLE_DEVICES) in `env` output."""
    found = {}
    for line in text.splitlines():
        match = GPU_ENV.match(line.strip())
        if match:
            found[match[1]] = match[2]
    return found


def limits_of(env: dict[str, str]) -> list[tuple[str, str]]:
    """(memory, cores) per device index, e.g. [("3000m", "30")]."""
    count = len([k for k in env if k.startswith("CUDA_DEVICE_MEMORY_LIMIT_")])
    return [
        (env.get(f"CUDA_DEVICE_MEMORY_LIMIT_{i}", "-"), env.get(f"CUDA_DEVICE_SM_LIMIT_{i}", "-"))
        for i in range(count)
    ]


def sleeping_pod(
    name: str,
    limits: dict[str, Any],
    annotations: dict[str, str] | None = None,
    command: str = "sleep 3600",
    **spec: Any,
) -> dict[str, Any]:
    """A pod that runs `command` on the node's GPUs (tests.support.pods.gpu_pod, in Ubuntu)."""
    return pods.gpu_pod(
        name,
        limits,
        annotations,
        image=pods.UBUNTU,
        command=["sh", "-c", command],
        terminationGracePeriodSeconds=1,
        **spec,
    )
