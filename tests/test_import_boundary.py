"""The translation core stays pure: no server framework, no Kubernetes client, no CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
HEAVY = ("fastapi", "uvicorn", "starlette", "typer", "kubernetes")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    program = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    if not Path(program).exists():
        pytest.fail("lint-imports is not installed: pip install -e '.[dev]'")
    return subprocess.run(
        [program, "--no-cache"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(root)},
    )


def test_import_linter_contracts_hold() -> None:
    run = lint_imports(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "7 kept, 0 broken" in run.stdout


@pytest.mark.parametrize(
    ("module", "imports", "contract"),
    [
        # the core reaching up into a cluster service
        ("core/workloads/volcano_jobs.py", "hami_dra_webhook.cluster.state", "Layers"),
        # a cluster service reaching up into the use case
        ("cluster/templates/gc.py", "hami_dra_webhook.admission.admitted", "Layers"),
        # one cluster room reaching into another (quota into the moves)
        (
            "cluster/quota/turn.py",
            "hami_dra_webhook.cluster.moves.inventory",
            "Cluster rooms",
        ),
        # what the rooms share reaching up into one of them
        ("cluster/events.py", "hami_dra_webhook.cluster.templates.store", "Cluster rooms"),
        # two sibling shells
        ("server/metrics.py", "hami_dra_webhook.migrate.report", "Layers"),
        # one command importing another sideways
        ("cli/scan_cmd.py", "hami_dra_webhook.cli.dry_run", "Commands independent"),
        # inside the core: a plain value reaching up into the translation
        ("core/model/types.py", "hami_dra_webhook.core.translate.pod", "The core's floors"),
        # inside the core: the two top siblings importing each other
        ("core/quota/gpu_quota.py", "hami_dra_webhook.core.migration.pools", "The core's floors"),
    ],
)
def test_a_wrong_import_breaks_a_contract(
    tmp_path: Path, module: str, imports: str, contract: str
) -> None:
    """The contracts can fail: a copy of the package with one import against the layout."""
    shutil.copytree(ROOT / "hami_dra_webhook", tmp_path / "hami_dra_webhook")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "hami_dra_webhook" / module
    target.write_text(target.read_text() + f"\nimport {imports}  # noqa\n")
    run = lint_imports(tmp_path)
    assert run.returncode != 0
    broken = [line for line in run.stdout.splitlines() if line.rstrip().endswith("BROKEN")]
    assert len(broken) == 1 and contract in broken[0], run.stdout


@pytest.mark.parametrize(
    "module",
    [
        "hami_dra_webhook.core.translate.pod",
        "hami_dra_webhook.cli.main",
        "hami_dra_webhook.cli.dry_run",
    ],
)
def test_importing_loads_no_heavy_module(module: str) -> None:
    code = f"import sys, {module}; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == ""


def test_the_import_circle_finder_names_each_circle_and_only_circles() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from import_cycles import circles
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    imports = {
        "p.a": {"p.b"},
        "p.b": {"p.c"},
        "p.c": {"p.a", "p.d"},  # a -> b -> c -> a, one circle of three
        "p.d": {"p.e"},
        "p.e": {"p.d"},  # and one of two
        "p.f": {"p.a"},  # on no circle
    }
    assert sorted(circles(imports)) == [["p.a", "p.b", "p.c"], ["p.d", "p.e"]]
    assert circles({"p.a": {"p.b"}, "p.b": set()}) == []


def test_the_package_has_no_import_circle() -> None:
    """Every import counted, those inside functions too (scripts/import_cycles.py)."""
    found = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "import_cycles.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert found.returncode == 0, found.stdout + found.stderr
    assert ": 0 circles" in found.stdout
