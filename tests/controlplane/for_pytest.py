"""The control plane's binaries for a pytest fixture: built or reused, or a skip that says why
(a failure when HAMI_E2E_REQUIRED=1, as .ci/run sets it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.controlplane.build import Binaries, GoMissing, build
from tests.controlplane.cluster import ControlPlane
from tests.controlplane.versions import Release, release


def binaries_or_skip(target: Release) -> Binaries:
    try:
        return build(target)
    except GoMissing as error:
        if os.environ.get("HAMI_E2E_REQUIRED") == "1":
            pytest.fail(f"HAMI_E2E_REQUIRED=1 but {error}", pytrace=False)
        pytest.skip(str(error))


def start_plane(
    minor: str,
    folder: Path,
    *,
    capacity: bool,
    controllers: bool = True,
    apiserver_args: tuple[str, ...] = (),
) -> ControlPlane:
    """A started control plane of `minor` (binaries built or reused, or the test skipped)."""
    target = release(minor)
    return ControlPlane(
        target,
        binaries_or_skip(target),
        folder,
        consumable_capacity=capacity,
        controllers=controllers,
        apiserver_args=apiserver_args,
    ).start()
