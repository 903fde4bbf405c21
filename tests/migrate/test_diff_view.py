"""`convert --diff` and `dry-run --diff`: the change as a reviewer reads it. The diff applied
with git's own `git apply` gives exactly what `convert --out` writes; nothing is written;
colour only on a terminal and never under NO_COLOR; and the run ends with its totals."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from hami_dra_webhook.cli.main import main

EXAMPLES = Path(__file__).parents[2] / "examples"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def run(*argv: str, stdout: io.StringIO | None = None) -> tuple[int, str, str]:
    out, err = stdout or io.StringIO(), io.StringIO()
    code = main(list(argv), stdin=io.StringIO(""), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_convert_diff_applies_to_what_convert_writes(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    for name in ("pod.yaml", "deployment.yaml"):
        shutil.copy(EXAMPLES / name, work / name)
    before = {p.name: p.read_text() for p in work.iterdir()}
    code, diff, err = run(
        "convert", "--diff", str(work / "pod.yaml"), str(work / "deployment.yaml")
    )
    assert code == 0, err
    assert {p.name: p.read_text() for p in work.iterdir()} == before  # nothing written
    assert "\x1b[" not in diff
    assert "-          nvidia.com/gpu: 1" in diff and "+  resourceClaims:" in diff
    assert err.splitlines()[-1] == (
        "total: 2 file(s) read, 2 would change; 2 workload(s) converted, 2 template(s) added,"
        " 0 refused"
    )
    code, _, _ = run("convert", "--out", str(tmp_path / "out"), str(work))
    assert code == 0
    (work / "changes.diff").write_text(
        diff.replace(f"a/{str(work).lstrip('/')}/", "a/").replace(
            f"b/{str(work).lstrip('/')}/", "b/"
        )
    )
    subprocess.run(["git", "apply", "changes.diff"], cwd=work, check=True)
    for name in ("pod.yaml", "deployment.yaml"):
        assert (work / name).read_text() == (tmp_path / "out" / name).read_text()


def test_colour_only_on_a_terminal_and_not_under_no_color(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    pod = str(EXAMPLES / "pod.yaml")
    _, painted, _ = run("convert", "--diff", pod, stdout=Terminal())
    assert "\x1b[32m+  resourceClaims:\x1b[0m" in painted
    assert "\x1b[31m-" in painted and "\x1b[36m@@" in painted
    monkeypatch.setenv("NO_COLOR", "1")
    _, plain, _ = run("convert", "--diff", pod, stdout=Terminal())
    assert "\x1b[" not in plain and "+  resourceClaims:" in plain
    # --color as git takes it (issue 65): always into a pipe, never on a terminal
    _, forced, _ = run("convert", "--diff", "--color", "always", pod)
    assert "\x1b[32m+  resourceClaims:\x1b[0m" in forced
    monkeypatch.delenv("NO_COLOR")
    _, never, _ = run("dry-run", "--diff", "--color", "never", pod, stdout=Terminal())
    assert "\x1b[" not in never and "resourceClaims" in never
    _, always, _ = run("dry-run", "--diff", "--color=always", pod)
    assert "\x1b[32m" in always


def test_dry_run_diff_shows_each_object_and_its_new_templates(tmp_path: Path) -> None:
    code, diff, _ = run("dry-run", "--diff", str(EXAMPLES / "pod.yaml"))
    assert code == 0
    assert diff.startswith("--- a/Pod gpu-pod (")
    assert "-        nvidia.com/gpumem: 3000\n" in diff
    assert "+    hami.io/converted-from: 'ubuntu-container: gpu=1,gpumem=3000,gpucores=30'" in diff
    assert "--- /dev/null\n+++ b/ResourceClaimTemplate hami-gpu-" in diff
    assert run("dry-run", "-o", "diff", str(EXAMPLES / "pod.yaml"))[1] == diff
    plain = tmp_path / "plain.yaml"
    plain.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n"
    )
    assert run("dry-run", "--diff", str(plain))[:2] == (0, "")
    assert run("convert", "--diff", str(plain))[:2] == (0, "")


def test_exit_code_gates_on_legacy_requests_that_remain(tmp_path: Path) -> None:
    """Issue 65: `--exit-code` is kubectl diff's convention (1: differences, here legacy GPU
    requests that remain; 0: none), for `convert` and `scan`; without it nothing changes."""
    legacy = str(EXAMPLES / "deployment.yaml")
    assert run("convert", "--diff", "--exit-code", legacy)[0] == 1
    assert run("convert", "--diff", legacy)[0] == 0
    assert run("scan", "--exit-code", legacy)[0] == 1
    assert run("scan", legacy)[0] == 0
    out = tmp_path / "out"
    assert run("convert", "--out", str(out), legacy)[0] == 0
    converted = str(out / "deployment.yaml")
    assert run("convert", "--diff", "--exit-code", converted)[:2] == (0, "")
    assert run("scan", "--exit-code", converted)[0] == 0
    other = tmp_path / "other.yaml"  # another scheduler keeps its legacy requests
    text = (EXAMPLES / "deployment.yaml").read_text()
    other.write_text(text.replace("schedulerName: hami-scheduler", "schedulerName: volcano"))
    code, out_text, _ = run("scan", "--exit-code", "-o", "json", str(other))
    (workload,) = json.loads(out_text)["workloads"]
    assert "acted_on" not in workload and "volcano" in " ".join(workload["attention"])
    assert code == run("scan", "-o", "json", str(other))[0]  # the flag adds nothing for it
