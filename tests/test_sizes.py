"""The size limits of the package (docs/development.md): no module over 400 lines, no
function over 60 (from its `def` to its last line, decorators aside). They were kept by hand;
this holds them."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / "hami_dra_webhook"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def test_no_module_is_over_400_lines() -> None:
    over = {
        str(path.relative_to(PACKAGE)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert over == {}


def test_no_function_is_over_60_lines() -> None:
    over = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    over[f"{path.relative_to(PACKAGE)}:{node.name}"] = lines
    assert over == {}
