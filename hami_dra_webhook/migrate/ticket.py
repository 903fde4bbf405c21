"""`scan -o markdown` and `scan -o csv`: the scan as a change ticket takes it. Markdown: the
totals, each namespace, each workload's containers with what they become and the reason of a
refusal, the quotas affected; CSV: one row per container (a workload without one: one row),
for a spreadsheet."""

from __future__ import annotations

import csv
import io
from typing import Any

from hami_dra_webhook import __version__
from hami_dra_webhook.migrate.quotas import QuotaReport
from hami_dra_webhook.migrate.render import summary, totals
from hami_dra_webhook.migrate.report import ContainerReport, WorkloadReport

CSV_HEADERS = (
    "namespace",
    "kind",
    "name",
    "embedded_at",
    "container",
    "legacy",
    "dra",
    "outcome",
    "reason",
    "message",
    "source",
    "attention",  # what needs a look, `; `-joined (the Markdown report's notes)
)


# What a name or a message may carry from a manifest or the cluster (anyone's text): in Markdown,
# neither a line of its own (a heading, a list) nor an HTML tag nor emphasis; in CSV, no formula
# (a cell a spreadsheet would run: =, +, -, @, a tab or a carriage return first).
_MARKDOWN = str.maketrans(
    {
        "\\": "\\\\",
        "|": "\\|",
        "`": "\\`",
        "*": "\\*",
        "_": "\\_",
        "[": "\\[",
        "]": "\\]",
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
        "\n": " ",
        "\r": " ",
    }
)
_FORMULA_FIRST = ("=", "+", "-", "@", "\t", "\r")


def _cell(text: object) -> str:
    """Text from a manifest or the cluster, inline in Markdown (a table cell or a note)."""
    return str(text).translate(_MARKDOWN)


def _csv_cell(value: object) -> str:
    """A CSV cell a spreadsheet shows as text, never runs (OWASP's CSV injection rule)."""
    text = str(value)
    return "'" + text if text.startswith(_FORMULA_FIRST) else text


def _legacy(legacy: dict[str, str]) -> str:
    return ", ".join(f"{key.rpartition('/')[2]}={value}" for key, value in legacy.items())


def as_markdown(
    reports: list[WorkloadReport], quotas: list[QuotaReport], unreadable: list[str]
) -> str:
    total = totals(reports)
    lines = [
        "# GPU workloads moving to DRA",
        "",
        f"Scanned by hami-dra-webhook {__version__}: {total['workloads']} workload(s) ask for"
        f" legacy GPU resources; {total['converted']} convert, {total['attention']} need"
        f" attention, {total['refused']} would be refused.",
        "",
        "| namespace | converted | needs attention | refused |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {_cell(ns)} | {c['converted']} | {c['attention']} | {c['refused']} |"
        for ns, c in summary(reports).items()
    ]
    lines += [
        f"| **total** | **{total['converted']}** | **{total['attention']}** |"
        f" **{total['refused']}** |",
        "",
        "## Workloads",
        "",
        "| namespace | workload | container | legacy request | under DRA | outcome |",
        "|---|---|---|---|---|---|",
    ]
    notes: list[str] = []
    for report in reports:
        workload = f"{report.kind}/{report.name}"
        if report.embedded_at:
            workload += f" ({report.embedded_at})"
        every: list[ContainerReport | None] = [*report.containers] or [None]
        for container in every:
            name, legacy, dra = (
                (container.name, _legacy(container.legacy), container.dra)
                if container
                else ("", "", "")
            )
            cells = (report.namespace, workload, name, legacy, dra, report.outcome)
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        if report.reason:
            notes.append(
                f"- **{_cell(workload)}** refused (`{report.reason}`): {_cell(report.message)}"
            )
        notes += [f"- {_cell(workload)}: {_cell(note)}" for note in report.attention]
    if notes:
        lines += ["", "## Refusals and what needs attention", "", *notes]
    lines += _quota_lines(quotas)
    if unreadable:
        lines += ["", "## Files that could not be read", ""]
        lines += [f"- {_cell(problem)}" for problem in unreadable]
    return "\n".join(lines) + "\n"


def _quota_lines(quotas: list[QuotaReport]) -> list[str]:
    if not quotas:
        return []
    lines = ["", "## Quotas and queues that count legacy GPU resources", ""]
    lines += [
        f"- {_cell(q.kind)}/{_cell(q.name)}"
        + (f" in {_cell(q.namespace)}" if q.namespace else "")
        + f" counts {_cell(', '.join(q.counted))}: {_cell(q.stops)}"
        for q in quotas
    ]
    return [*lines, "", *dict.fromkeys(_cell(q.note) for q in quotas if q.note)]


def as_csv(reports: list[WorkloadReport], unreadable: tuple[str, ...] | list[str] = ()) -> str:
    """One row per container; a file that could not be read is a row too (outcome
    `unreadable`, the reason in `message`), so that the sheet misses nothing the scan did."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_HEADERS)
    for problem in unreadable:
        source, _, why = problem.partition(": ")
        cells = ["", "", "", "", "", "", "", "unreadable", "", why or problem, source, ""]
        writer.writerow([_csv_cell(cell) for cell in cells])
    for report in reports:
        every: list[ContainerReport | None] = [*report.containers] or [None]
        for container in every:
            row: list[Any] = [report.namespace, report.kind, report.name, report.embedded_at]
            if container is None:
                row += ["", "", ""]
            else:
                row += [container.name, _legacy(container.legacy), container.dra]
            row += [report.outcome, report.reason, report.message, report.source]
            row.append("; ".join(report.attention))
            writer.writerow([_csv_cell(cell) for cell in row])
    return out.getvalue()
