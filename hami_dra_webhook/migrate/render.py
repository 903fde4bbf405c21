"""Scan reports as plain columns (as kubectl prints them) with a per-namespace summary, or as
JSON. No console library: the columns are padded text, one line per container, the reasons and
notes of a workload indented under it."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, TextIO

from hami_dra_webhook.migrate.quotas import QuotaReport
from hami_dra_webhook.migrate.report import ContainerReport, WorkloadReport

HEADERS = ("NAMESPACE", "WORKLOAD", "CONTAINER", "LEGACY REQUEST", "UNDER DRA", "OUTCOME")
GAP = "   "


def summary(reports: list[WorkloadReport]) -> dict[str, dict[str, int]]:
    by_namespace: dict[str, Counter[str]] = {}
    for report in reports:
        by_namespace.setdefault(report.namespace, Counter())[report.outcome] += 1
    return {
        namespace: {outcome: counts[outcome] for outcome in ("converted", "attention", "refused")}
        for namespace, counts in sorted(by_namespace.items())
    }


def totals(reports: list[WorkloadReport]) -> dict[str, int]:
    """The grand total: workloads, and how many of each outcome."""
    counts = Counter(report.outcome for report in reports)
    return {
        "workloads": len(reports),
        **{outcome: counts[outcome] for outcome in ("converted", "attention", "refused")},
    }


def as_json(
    reports: list[WorkloadReport],
    notes: list[str],
    unreadable: list[str] | None = None,
    quotas: list[QuotaReport] | None = None,
) -> str:
    return json.dumps(as_data(reports, notes, unreadable, quotas), indent=2) + "\n"


def as_data(
    reports: list[WorkloadReport],
    notes: list[str],
    unreadable: list[str] | None = None,
    quotas: list[QuotaReport] | None = None,
    gpu_quotas: list[Any] | None = None,
) -> dict[str, Any]:
    """The report as data (`-o json` and `-o yaml` write it); `gpu_quotas`: a cluster's GPU
    quotas as they hold now (cluster/quota/usage.QuotaLine)."""
    data = {
        "workloads": [r.as_json() for r in reports],
        "summary": summary(reports),
        "total": totals(reports),
        "quotas": [q.as_json() for q in quotas or []],
        "unreadable": unreadable or [],
        "notes": notes,
    }
    if gpu_quotas is not None:
        data["gpuQuotas"] = [line.as_json() for line in gpu_quotas]
    return data


def columns(rows: list[tuple[str, ...]]) -> list[str]:
    """Rows padded to aligned columns (the last column is not padded)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return [
        GAP.join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]])
        for row in rows
    ]


def as_table(
    reports: list[WorkloadReport],
    notes: list[str],
    out: TextIO,
    unreadable: list[str] | None = None,
    quotas: list[QuotaReport] | None = None,
    gpu_quotas: list[Any] | None = None,
) -> None:
    if not reports:
        out.write("No workload asks for legacy HAMi GPU resources.\n")
    else:
        _workloads(reports, out)
        out.write("\nPer namespace\n")
        rows: list[tuple[str, ...]] = [("NAMESPACE", "CONVERTED", "NEEDS ATTENTION", "REFUSED")]
        rows += [
            (namespace, str(c["converted"]), str(c["attention"]), str(c["refused"]))
            for namespace, c in summary(reports).items()
        ]
        total = totals(reports)
        rows.append(
            ("TOTAL", str(total["converted"]), str(total["attention"]), str(total["refused"]))
        )
        out.writelines(line + "\n" for line in columns(rows))
    if quotas:
        out.write("\nQuotas and queues that count legacy GPU resources\n")
        table: list[tuple[str, ...]] = [("NAMESPACE", "OBJECT", "COUNTS")]
        table += [(q.namespace, f"{q.kind}/{q.name}", ", ".join(q.counted)) for q in quotas]
        notes_of = {
            note: n for n, note in enumerate(dict.fromkeys(q.note for q in quotas if q.note), 1)
        }
        for quota, line in zip([None, *quotas], columns(table), strict=True):
            out.write(line.rstrip() + "\n")
            if quota is not None:
                see = f" (note {notes_of[quota.note]})" if quota.note else ""
                out.write(f"    - {quota.stops}{see}\n")
                out.writelines(f"    - DRA form: {k}: {v}\n" for k, v in quota.dra_form.items())
                out.writelines(
                    f"    - DRA form in {'.'.join(path)}: {k}: {v}\n"
                    for path, entries in quota.sections.items()
                    for k, v in entries.items()
                )
                if quota.kueue_mapping is not None:
                    out.write(
                        f"    - DRA form: resources.deviceClassMappings: {quota.kueue_mapping}\n"
                    )
                out.write(f"    - from {quota.source}\n" if quota.source else "")
        for note, number in notes_of.items():
            out.write(f"note {number}: {note}\n")
    if gpu_quotas:
        out.write("\nGPU quotas kept for converted pods (docs/quotas.md)\n")
        rows = [("NAMESPACE", "QUOTA", "KEY", "USED", "HARD", "HELD PODS")]
        rows += [
            (q.namespace, q.quota, q.key, q.used_words, str(q.hard), str(q.held))
            for q in gpu_quotas
        ]
        out.writelines(line + "\n" for line in columns(rows))
    if unreadable:  # each is said on stderr as it is found (`unreadable:` lines)
        out.write(f"{len(unreadable)} file(s) could not be read; the report covers the rest.\n")
    for note in notes:
        out.write(f"note: {note}\n")


def _workloads(reports: list[WorkloadReport], out: TextIO) -> None:
    rows: list[tuple[str, ...]] = [HEADERS]
    details: dict[int, list[str]] = {}  # row index -> lines under it
    for report in reports:
        containers: list[ContainerReport | None] = [*report.containers] or [None]
        for index, container in enumerate(containers):
            legacy = (
                ", ".join(f"{k.split('/')[-1]}={v}" for k, v in container.legacy.items())
                if container
                else ""
            )
            first = index == 0
            rows.append(
                (
                    report.namespace if first else "",
                    f"{report.kind}/{report.name}" if first else "",
                    container.name if container else "",
                    legacy,
                    container.dra if container else "",
                    report.outcome if first else "",
                )
            )
        lines = [f"pod template at {report.embedded_at}"] if report.embedded_at else []
        lines += [f"from {report.source}"] if report.source not in ("", "cluster") else []
        lines += [f"selectors: {report.selectors}"] if report.selectors else []
        lines += [f"{report.message} [{report.reason}]"] if report.reason else []
        lines += report.attention + report.notes
        if lines:
            details[len(rows) - 1] = lines
    for number, line in enumerate(columns(rows)):
        out.write(line.rstrip() + "\n")
        for detail in details.get(number, []):
            out.write(f"    - {detail}\n")
