"""Other projects' files, read where they are (`../shared`, beside the repository), never copied
into it. Without them a test skips with the reason, or fails where every test must run
(HAMI_E2E_REQUIRED=1, as .ci/run sets it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[3] / "shared"


def shared_path(*parts: str, what: str) -> Path:
    """`../shared/<parts>`, which must exist; `what` says in words what it holds."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        reason = f"{what} is read from {path}, which is absent"
        if os.environ.get("HAMI_E2E_REQUIRED") == "1":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return path
