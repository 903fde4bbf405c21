"""The default run's three pytest runs are chosen by marker (tests/support/suite.py): `node`
beside the quiet tests, then `timed` alone. These checks keep the markers where they belong."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
# What a test calls when it measures latencies or the process's memory under load.
MEASURES = re.compile(r"\b(assert_held|latency_bound|warmed_baseline|Established)\(")


def _modules() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def _marked(text: str, marker: str) -> bool:
    return re.search(rf"^pytestmark = .*pytest\.mark\.{marker}\b", text, re.MULTILINE) is not None


def test_the_test_modules_are_found() -> None:
    assert len(_modules()) > 80


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(TESTS)))
def test_each_module_runs_where_it_belongs(path: Path) -> None:
    text = path.read_text()
    node, timed = _marked(text, "node"), _marked(text, "timed")
    assert not (node and timed), "a test is either the node's or timed, not both"
    if path.parent.name == "node":
        assert node, "tests/node needs the real node: mark the module pytest.mark.node"
    else:
        assert not node, "only tests/node runs on the real node"
    if MEASURES.search(text):
        assert timed, "it measures under load: mark the module pytest.mark.timed"
