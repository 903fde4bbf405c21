"""The default run's pytest runs are chosen by marker (tests/support/suite.py): `node` beside the
quiet tests, then `timed` alone. These checks keep the markers where they belong: `node` on the
modules of tests/node (they all need the real node), `timed` on each test that measures under
load, and on no module as a whole (a module's other tests run with the quiet ones)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
# What a test calls when it measures latencies or the process's memory under load.
MEASURES = re.compile(r"\b(assert_held|latency_bound|warmed_baseline|Established|rss_mib)\(")


def _modules() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def _module_marked(text: str, marker: str) -> bool:
    return re.search(rf"^pytestmark = .*pytest\.mark\.{marker}\b", text, re.MULTILINE) is not None


def _timed(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(ast.unparse(d).startswith("pytest.mark.timed") for d in function.decorator_list)


def measuring_tests(text: str) -> dict[str, bool]:
    """Each test function of a module -> whether it measures: it calls one of MEASURES, itself
    or through the module's own functions it calls."""
    tree = ast.parse(text)
    functions = {
        node.name: node
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    found: dict[str, bool] = {}

    def measures(name: str, seen: frozenset[str]) -> bool:
        if name in found:
            return found[name]
        function = functions[name]
        if MEASURES.search(ast.get_source_segment(text, function) or ""):
            return True
        called = {
            call.func.id
            for call in ast.walk(function)
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
        }
        return any(measures(c, seen | {name}) for c in called if c in functions and c not in seen)

    for name in functions:
        if name.startswith("test_"):
            found[name] = measures(name, frozenset())
    return found


def test_the_test_modules_are_found() -> None:
    assert len(_modules()) > 80


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(TESTS)))
def test_each_module_runs_where_it_belongs(path: Path) -> None:
    text = path.read_text()
    node = _module_marked(text, "node")
    assert not _module_marked(text, "timed"), (
        "mark each test that measures @pytest.mark.timed, not the module: its other tests run"
        " with the quiet ones"
    )
    if path.parent.name == "node":
        assert node, "tests/node needs the real node: mark the module pytest.mark.node"
    else:
        assert not node, "only tests/node runs on the real node"
    tree = ast.parse(text)
    functions = {
        f.name: f for f in tree.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    unmarked = [
        name
        for name, measures in measuring_tests(text).items()
        if measures and not _timed(functions[name])
    ]
    assert not unmarked, f"they measure under load: mark them @pytest.mark.timed: {unmarked}"
    if node:
        timed = [name for name, f in functions.items() if _timed(f)]
        assert not timed, f"a test is either the node's or timed, not both: {timed}"


def test_a_test_that_measures_through_a_helper_is_found() -> None:
    """The check reads through the module's own helpers, and only there. (The calls are written
    apart so that this module itself measures nothing.)"""
    text = (
        "def _load(w):\n    return latency_bound" + "(w)\n\n"
        "def _outer(w):\n    return _load(w)\n\n"
        "def test_direct(w):\n    assert_held" + "(w)\n\n"
        "def test_through(w):\n    _outer(w)\n\n"
        "def test_plain(w):\n    w.post()\n"
    )
    assert measuring_tests(text) == {
        "test_direct": True,
        "test_through": True,
        "test_plain": False,
    }


def test_the_default_jobs_leave_nothing_out_and_run_nothing_twice(tmp_path: Path) -> None:
    """The default run's jobs: one per flavor, each once; each node module that needs the
    legacy node in a job of its own, which the other node modules' job ignores; the in-process
    and shared-plane tiers split by the `plane` marker; the timed tests started first, the
    static checks before the longest jobs."""
    from tests.controlplane.versions import ALL_FLAVORS
    from tests.support import suite

    jobs = suite.default_jobs(tmp_path)
    flavors = [j.env["HAMI_E2E_FLAVORS"] for j in jobs if j.env and "HAMI_E2E_FLAVORS" in j.env]
    assert sorted(flavors) == sorted(f.id for f in ALL_FLAVORS)
    legacy = suite.legacy_node_modules()
    assert "tests/node/test_staged_migration.py" in legacy
    assert "tests/node/test_staged_moves.py" in legacy
    others = next(j for j in jobs if j.name == "node: the other modules")
    for module in legacy:
        assert f"--ignore={module}" in others.command
        assert sum(module in j.command for j in jobs) == 1
    assert f"{suite.ALWAYS_OUT} and not plane" in suite.IN_PROCESS
    assert f"{suite.ALWAYS_OUT} and plane" in suite.SHARED_PLANE
    assert [j.name for j in jobs if j.first] == ["timed"]
    assert [j.name for j in jobs if j.leading] == ["static checks"]
    assert len({j.name for j in jobs}) == len(jobs) == len({j.junit for j in jobs})
    # The node versions: some in the default run, the others in --long, each once.
    from tests.node.conftest import VERSIONS

    split = suite.DEFAULT_NODE_VERSIONS.split(",") + suite.LONG_NODE_VERSIONS.split(",")
    assert sorted(split) == sorted(VERSIONS)


class _Item:
    """A collected test as plane_mismatches reads it (a stand-in: its nodeid, its fixtures and
    its marks are all that function reads)."""

    def __init__(self, nodeid: str, fixtures: tuple[str, ...], marked: bool = False) -> None:
        self.nodeid, self.fixturenames = nodeid, fixtures
        self.marks = ["plane"] if marked else []

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.marks else None

    def add_marker(self, mark: pytest.MarkDecorator) -> None:
        self.marks.append(mark.name)


def test_a_tests_tier_is_said_where_it_lives() -> None:
    """Outside tests/e2e and tests/node a test on the shared plane says so, and one that says so
    uses it; inside them the folder says it (tests/conftest.py)."""
    from tests.conftest import plane_mismatches

    said = _Item("tests/cluster/test_x.py::test_said", ("kube",), marked=True)
    unsaid = _Item("tests/cluster/test_x.py::test_unsaid", ("real_api", "tmp_path"))
    false = _Item("tests/cluster/test_x.py::test_false", ("tmp_path",), marked=True)
    folder = _Item("tests/e2e/test_y.py::test_z[1.37]", ("cluster",))
    wrong = plane_mismatches([said, unsaid, false, folder])  # type: ignore[list-item]
    assert wrong == [
        "tests/cluster/test_x.py::test_unsaid uses a control plane: mark it @pytest.mark.plane",
        "tests/cluster/test_x.py::test_false is marked plane and uses none: remove the mark",
    ]
    assert folder.marks == ["plane"]
