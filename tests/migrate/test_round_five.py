"""Issue 61 (red team, round five), the commands' own findings: what they write never runs in a
spreadsheet or a terminal, never shapes a Markdown ticket, and `convert` never writes through a
symbolic link nor follows one out of its tree."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import markdown
import pytest

from hami_dra_webhook.cli.main import main
from hami_dra_webhook.cli.terminal import Printable, printable, raw
from hami_dra_webhook.migrate.report import ContainerReport, WorkloadReport
from hami_dra_webhook.migrate.ticket import as_csv, as_markdown

POD = """apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  containers:
  - name: c
    image: x
    resources: {{limits: {{nvidia.com/gpu: 1, nvidia.com/gpumem: 1000}}}}
"""


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), stdin=io.StringIO(""), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _report(name: str, message: str = "") -> WorkloadReport:
    container = ContainerReport(name, {"nvidia.com/gpu": "1"}, "gpu 1")  # as a container name
    return WorkloadReport(
        namespace="team",
        kind="Pod",
        name=name,
        outcome="refused" if message else "converted",
        containers=[container],
        reason="bad-quantity" if message else "",
        message=message,
    )


@pytest.mark.parametrize("name", ['=HYPERLINK("http://x")', "+1+1", "-2+3", "@SUM(A1)"])
def test_csv_cells_never_start_a_formula(name: str) -> None:
    rows = list(csv.reader(io.StringIO(as_csv([_report(name)]))))
    (row,) = rows[1:]
    assert row[2] == "'" + name and row[4] == "'" + name  # the workload, its container
    assert all(not cell.startswith(("=", "+", "-", "@")) for cell in row)


def test_a_name_cannot_give_a_markdown_ticket_a_heading_or_a_tag() -> None:
    name = "x\n# Approved\n<img src=x onerror=alert(1)>"
    text = as_markdown([_report(name, message=f"container {name!s}: wrong")], [], [])
    html = markdown.markdown(text, extensions=["tables"])
    assert html.count("<h1>") == 1 and "<img" not in html  # the ticket's own heading only
    assert "Approved" in html  # said, as text


def test_printed_text_shows_control_characters_instead_of_running_them() -> None:
    shown = printable("pod \x1b]0;owned\x07 \x1b[2J\x9b1m ok\tfine\n")
    assert shown == "pod \\x1b]0;owned\\x07 \\x1b[2J\\x9b1m ok\tfine\n"
    underneath = io.StringIO()
    stream = Printable(underneath)
    stream.write("\x1b[31m")
    raw(stream).write("\x1b[0m")  # the project's own sequence, as a diff's colour
    assert underneath.getvalue() == "\\x1b[31m\x1b[0m"


def test_every_command_prints_through_the_filter(tmp_path: Path) -> None:
    """A workload whose name carries an escape sequence (a YAML double-quoted string may): the
    refusal `convert` prints shows it escaped."""
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD.format(name='"evil\\e[2Jname"').replace("1000", "16Gi"))
    code, out, err = run("convert", str(manifest), "--diff")
    assert code == 2, err
    assert "\x1b" not in out + err and "\\x1b[2J" in err


def test_a_link_in_the_tree_is_skipped_and_said(tmp_path: Path) -> None:
    tree, outside = tmp_path / "tree", tmp_path / "outside.yaml"
    tree.mkdir()
    outside.write_text(POD.format(name="secret"))
    (tree / "pod.yaml").write_text(POD.format(name="mine"))
    (tree / "link.yaml").symlink_to(outside)
    code, out, err = run("convert", str(tree), "--out", str(tmp_path / "out"))
    assert code == 0, err
    assert f"skipped: {tree / 'link.yaml'}: a symbolic link" in err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["pod.yaml"]
    assert "secret" not in out


def test_convert_never_writes_through_a_link_in_the_output(tmp_path: Path) -> None:
    tree, out, victim = tmp_path / "tree", tmp_path / "out", tmp_path / "victim.yaml"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "pod.yaml").write_text(POD.format(name="mine"))
    victim.write_text("kept\n")
    (out / "sub").mkdir(parents=True)
    (out / "sub" / "pod.yaml").symlink_to(victim)  # planted: the file itself a link
    code, _, err = run("convert", str(tree), "--out", str(out))
    assert code == 3 and "is a symbolic link; convert never writes through one" in err, err
    assert victim.read_text() == "kept\n"
    os.remove(out / "sub" / "pod.yaml")
    os.rmdir(out / "sub")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / "sub").symlink_to(elsewhere)  # planted: a folder on the way a link
    code, _, err = run("convert", str(tree), "--out", str(out))
    assert code == 3 and f"{out / 'sub'} is a symbolic link" in err, err
    assert not list(elsewhere.iterdir())


def test_in_place_never_writes_through_a_link(tmp_path: Path) -> None:
    real, link = tmp_path / "real.yaml", tmp_path / "link.yaml"
    real.write_text(POD.format(name="mine"))
    link.symlink_to(real)
    code, _, err = run("convert", str(link), "--in-place")
    assert code == 3 and "is a symbolic link" in err, err
    assert "nvidia.com/gpu" in real.read_text()
