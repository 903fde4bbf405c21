"""The package's import graph, every import counted (those inside functions and under
TYPE_CHECKING too): prints its size and each import circle, and exits 1 when there is one.

    python scripts/import_cycles.py            (scripts/test runs it after the import contracts)

import-linter's contracts say which layer may import which; a circle inside one layer (two
modules that import each other, one of them inside a function) passes them, so it is found here.
"""

from __future__ import annotations

import sys

import grimp

PACKAGE = "hami_dra_webhook"


def circles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(imports):
        if root in index:
            continue
        work = [(root, iter(sorted(imports[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(imports.get(target, ())))))
                elif target in on_stack:
                    low[module] = min(low[module], index[target])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def main() -> int:
    graph = grimp.build_graph(PACKAGE)
    imports = {
        module: {
            target
            for target in graph.find_modules_directly_imported_by(module)
            if target.startswith(PACKAGE)
        }
        for module in graph.modules
        if module.startswith(PACKAGE)
    }
    edges = sum(len(targets) for targets in imports.values())
    found = circles(imports)
    print(f"{len(imports)} modules, {edges} imports inside {PACKAGE}: {len(found)} circles")
    for component in found:
        print(f"circle of {len(component)}:")
        for module in component:
            for target in sorted(imports[module] & set(component)):
                print(f"  {module} -> {target}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
