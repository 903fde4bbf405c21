"""The translation core stays pure: no server framework, no Kubernetes client, no CLI."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
HEAVY = ("fastapi", "uvicorn", "starlette", "typer", "kubernetes")


def test_import_linter_contracts_hold() -> None:
    lint_imports = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    if not Path(lint_imports).exists():
        pytest.fail("lint-imports is not installed: pip install -e '.[dev]'")
    run = subprocess.run(
        [lint_imports, "--no-cache"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "3 kept, 0 broken" in run.stdout


@pytest.mark.parametrize(
    "module",
    [
        "hami_dra_webhook.core.translate",
        "hami_dra_webhook.cli.main",
        "hami_dra_webhook.cli.dry_run",
    ],
)
def test_importing_loads_no_heavy_module(module: str) -> None:
    code = f"import sys, {module}; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == ""
