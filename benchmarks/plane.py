"""The benchmarks' control plane: etcd and kube-apiserver of one version, built by
tests/controlplane, with no scheduler or controller-manager (nothing but the benchmark loads it)."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.controlplane.build import build
from tests.controlplane.cluster import ControlPlane
from tests.controlplane.versions import release


@contextlib.contextmanager
def bare_control_plane(version: str) -> Iterator[tuple[ControlPlane, Path]]:
    """A started control plane and a scratch folder beside it; both gone afterwards."""
    target = release(version)
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        plane = ControlPlane(
            target, build(target), folder / "plane", consumable_capacity=True, controllers=False
        ).start()
        try:
            yield plane, folder
        finally:
            plane.stop()
