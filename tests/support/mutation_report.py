"""The mutation score per module of the core, the admission use case and the cluster side, from
the results `mutmut run` left in mutants/ (the exit code says whether the core reaches TARGET).

    python -m tests.support.mutation_report            (scripts/mutation runs mutmut first)

A mutant is killed when a core test fails on it (or it hangs: a timeout). Surviving mutants
listed in tests/support/mutation_equivalent.txt, each with why it cannot be told apart from the real
code, are left out of the score; every other survivor is a test to write.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EQUIVALENT = Path(__file__).with_name("mutation_equivalent.txt")
KILLED = {1, 24, -24, 36, -9}  # tests failed, or the mutant ran into the timeout
TARGET = 0.95


def equivalent() -> dict[str, str]:
    """mutant name -> why it is equivalent, from `name  # reason` lines."""
    found = {}
    for line in EQUIVALENT.read_text().splitlines():
        name, _, reason = line.partition("#")
        if name.strip():
            found[name.strip()] = reason.strip()
    return found


def main() -> int:
    explained = equivalent()
    rows: dict[str, list[tuple[str, Counter[str]]]] = {}
    survivors: list[str] = []
    stale = set(explained)
    for meta in sorted((ROOT / "mutants" / "hami_dra_webhook").rglob("*.py.meta")):
        results: dict[str, int | None] = json.loads(meta.read_text())["exit_code_by_key"]
        counts: Counter[str] = Counter()
        for name, code in results.items():
            stale.discard(name)
            if code is None:  # not run yet: mutmut was stopped (scripts/mutation --resume)
                counts["not run"] += 1
            elif code in KILLED:
                counts["killed"] += 1
            elif name in explained:
                counts["equivalent"] += 1
            else:
                counts["alive"] += 1
                survivors.append(name)
        module = str(meta.relative_to(ROOT / "mutants" / "hami_dra_webhook"))
        package, _, rest = module.removesuffix(".py.meta").partition("/")
        rows.setdefault(package, []).append((rest, counts))
    if not rows:
        print("no results in mutants/: run scripts/mutation", file=sys.stderr)
        return 2
    totals: dict[str, Counter[str]] = {}
    print(
        f"{'module':<34}{'mutants':>9}{'killed':>8}{'equiv.':>8}{'alive':>7}{'not run':>9}"
        f"{'score':>8}"
    )
    for package, modules in rows.items():
        total = totals[package] = Counter()
        for module, counts in modules:
            total.update(counts)
            print(_row(f"{package}/{module}", counts))
        print(_row(package, total))
    for name in survivors:
        print(f"alive: {name}")
    for name in sorted(stale):
        print(f"listed as equivalent but no longer a mutant: {name}")
    core = totals.get("core", Counter())
    score = core["killed"] / max(1, core["killed"] + core["alive"])
    return 0 if score >= TARGET else 1


def _row(module: str, counts: Counter[str]) -> str:
    """A module's counts; its score is of the mutants run (killed / killed and alive)."""
    ran = counts["killed"] + counts["equivalent"] + counts["alive"]
    score = counts["killed"] / max(1, counts["killed"] + counts["alive"])
    return (
        f"{module:<34}{ran + counts['not run']:>9}{counts['killed']:>8}"
        f"{counts['equivalent']:>8}{counts['alive']:>7}{counts['not run']:>9}{score:>8.1%}"
    )


if __name__ == "__main__":
    sys.exit(main())
