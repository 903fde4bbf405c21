"""The previous release's tree, as the upgrade test (tests/node/test_staged_upgrade.py, `long`)
builds its image: its dependency inputs must match this checkout's bytes and modes, or buildah's
layer cache misses and the build tries the network from inside the test network namespace."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest

from tests.node.images import DEPENDENCY_INPUTS, ROOT, ImageBuildFailed, _as_checked_out


def _archived(folder: Path) -> Path:
    """The inputs as `git archive | tar -x` leaves them: the same bytes, mode 0664."""
    for name in DEPENDENCY_INPUTS:
        shutil.copyfile(ROOT / name, folder / name)
        (folder / name).chmod(0o664)
    return folder


def test_the_inputs_get_this_checkouts_modes(tmp_path: Path) -> None:
    folder = _archived(tmp_path)
    _as_checked_out(folder)
    for name in DEPENDENCY_INPUTS:
        assert stat.S_IMODE((folder / name).stat().st_mode) == stat.S_IMODE(
            (ROOT / name).stat().st_mode
        ), name


def test_different_lock_files_are_named_not_fetched(tmp_path: Path) -> None:
    folder = _archived(tmp_path)
    changed = folder / DEPENDENCY_INPUTS[0]
    changed.write_bytes(changed.read_bytes() + b"# another pin\n")
    with pytest.raises(ImageBuildFailed, match=DEPENDENCY_INPUTS[0]):
        _as_checked_out(folder)
