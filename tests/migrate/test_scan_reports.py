"""`scan` as a change ticket takes it (issue 49): a grand total in every form, `-o markdown`
(a table that renders as one) and `-o csv` (one row per container, read back by the csv
module), and `unreadable:` lines on stderr, where the other messages go."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import markdown

from tests.migrate.test_scan import TREE, scan


def test_the_text_table_and_the_data_have_a_grand_total() -> None:
    code, out, _ = scan(str(TREE))
    assert code == 2
    per_namespace = out.split("Per namespace\n", 1)[1].splitlines()
    assert per_namespace[-1].split() == ["TOTAL", "2", "2", "2"]
    _, data, _ = scan(str(TREE), "-o", "json")
    assert json.loads(data)["total"] == {
        "workloads": 6,
        "converted": 2,
        "attention": 2,
        "refused": 2,
    }


def test_markdown_is_a_ticket_that_renders() -> None:
    code, out, _ = scan(str(TREE), "-o", "markdown")
    assert code == 2 and out.startswith("# GPU workloads moving to DRA\n")
    assert "6 workload(s) ask for legacy GPU resources; 2 convert" in out
    assert "| **total** | **2** | **2** | **2** |" in out
    assert '**Pod/big-memory** refused (`bad-quantity`): container "trainer"' in out
    html = markdown.markdown(out, extensions=["tables"])
    assert html.count("<table>") == 2 and "<td>Deployment/triton</td>" in html


def test_csv_has_one_row_per_container() -> None:
    code, out, _ = scan(str(TREE), "-o", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 2 and len(rows) == 6
    refused = {r["name"]: r for r in rows if r["outcome"] == "refused"}
    assert refused["big-memory"]["reason"] == "bad-quantity"
    assert refused["big-memory"]["legacy"] == "gpu=1, gpumem=16Gi"
    assert refused["notebooks"]["message"].startswith('container "jupyter": nvidia.com/gpumem')


def test_unreadable_files_are_said_on_stderr(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("kind: [unclosed\n")
    (tmp_path / "ok.yaml").write_text((TREE / "team-a" / "apps.yaml").read_text())
    code, out, err = scan(str(tmp_path))
    assert code == 3
    assert "unreadable:" not in out and "1 file(s) could not be read" in out
    assert err.startswith(f"unreadable: {tmp_path / 'bad.yaml'}")


def test_what_queues_share_is_said_once(tmp_path: Path) -> None:
    """Kueue's way of counting claims was a 400-character sentence under every ClusterQueue."""
    queue = (
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {{name: {name}}}\n"
        "spec:\n  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n"
        "    flavors: [{{name: f, resources: [{{name: nvidia.com/gpu, nominalQuota: 8}}]}}]\n"
    )
    (tmp_path / "queues.yaml").write_text("---\n".join(queue.format(name=n) for n in "abc"))
    code, out, _ = scan(str(tmp_path))
    assert code == 1
    assert out.count("Kueue stops counting their GPUs here (note 1)") == 3
    assert out.count("deviceClassMappings") == 1 and "\nnote 1: Kueue counts DRA claims" in out
    assert max(len(line) for line in out.splitlines() if "stops counting" in line) < 100


def test_csv_keeps_what_needs_attention_and_a_row_per_unreadable_file(tmp_path: Path) -> None:
    """Issue 65: the sheet misses nothing the scan found: the attention notes (the Markdown
    report's) in a column, and each file that could not be read as a row."""
    (tmp_path / "bad.yaml").write_text("kind: [unclosed\n")
    (tmp_path / "ok.yaml").write_text((TREE / "team-a" / "apps.yaml").read_text())
    code, out, _ = scan(str(tmp_path), "-o", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    (bad,) = [r for r in rows if r["outcome"] == "unreadable"]
    assert code == 3 and bad["source"] == str(tmp_path / "bad.yaml") and bad["message"], bad
    _, tree, _ = scan(str(TREE), "-o", "csv")
    attention = [r for r in csv.DictReader(io.StringIO(tree)) if r["outcome"] == "attention"]
    assert attention and all(r["attention"] for r in attention), attention
