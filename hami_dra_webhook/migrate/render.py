"""Scan reports as a readable table (rich) with a per-namespace summary, or as JSON."""

from __future__ import annotations

import json
from collections import Counter
from typing import TextIO

from rich.console import Console
from rich.table import Table

from hami_dra_webhook.migrate.report import WorkloadReport

STYLE = {"converts": "green", "attention": "yellow", "refused": "red"}


def summary(reports: list[WorkloadReport]) -> dict[str, dict[str, int]]:
    by_namespace: dict[str, Counter[str]] = {}
    for report in reports:
        by_namespace.setdefault(report.namespace, Counter())[report.outcome] += 1
    return {
        namespace: {outcome: counts[outcome] for outcome in ("converts", "attention", "refused")}
        for namespace, counts in sorted(by_namespace.items())
    }


def as_json(
    reports: list[WorkloadReport], notes: list[str], unreadable: list[str] | None = None
) -> str:
    document = {
        "workloads": [r.as_json() for r in reports],
        "summary": summary(reports),
        "unreadable": unreadable or [],
        "notes": notes,
    }
    return json.dumps(document, indent=2) + "\n"


def as_table(
    reports: list[WorkloadReport],
    notes: list[str],
    out: TextIO,
    unreadable: list[str] | None = None,
    width: int = 160,
) -> None:
    console = Console(file=out, width=width, soft_wrap=False, highlight=False)
    if not reports:
        console.print("No workload asks for legacy HAMi GPU resources.")
    table = Table(title="Workloads with legacy HAMi GPU requests", show_lines=True)
    for column in ("namespace", "workload", "container", "legacy request", "under DRA", "outcome"):
        table.add_column(column, overflow="fold")
    for report in reports:
        outcome = f"[{STYLE[report.outcome]}]{report.outcome}[/]"
        details = [report.reason] if report.reason else []
        details += report.attention
        if details:
            outcome += "\n" + "\n".join(f"- {d}" for d in details)
        legacy = "\n".join(
            ", ".join(f"{k.split('/')[-1]}={v}" for k, v in c.legacy.items())
            for c in report.containers
        )
        dra = "\n".join(c.dra for c in report.containers)
        if report.selectors:
            dra += f"\n({report.selectors})"
        table.add_row(
            report.namespace,
            f"{report.kind}/{report.name}",
            "\n".join(c.name for c in report.containers),
            legacy,
            dra,
            outcome,
        )
    if reports:
        console.print(table)
        totals = Table(title="Per namespace")
        for column in ("namespace", "converts", "needs attention", "refused"):
            totals.add_column(column)
        for namespace, counts in summary(reports).items():
            totals.add_row(
                namespace, str(counts["converts"]), str(counts["attention"]), str(counts["refused"])
            )
        console.print(totals)
    for problem in unreadable or []:
        console.print(f"[red]unreadable[/]: {problem}", markup=True)
    if unreadable:
        console.print(f"{len(unreadable)} file(s) could not be read; the report covers the rest.")
    for note in notes:
        console.print(f"note: {note}")
