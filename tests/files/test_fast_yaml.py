"""files/fast_yaml.py against PyYAML's own safe loader and dumper: the same values, of the same
types, from every document; the same text from every value; the same errors."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from hami_dra_webhook.files.fast_yaml import (
    BLOCK_OPTIONS,
    FastSafeDumper,
    FastSafeLoader,
    dump_block,
)
from tests.support.shared import shared_path

PyLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
PyDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class NoAliasPyDumper(PyDumper):  # type: ignore[misc, valid-type]
    def ignore_aliases(self, data: Any) -> bool:
        return True


def typed(value: Any, above: tuple[int, ...] = ()) -> Any:
    """`value` with each scalar's type beside it (1, 1.0 and True are equal in Python), and
    where an object holds itself, a mark."""
    if isinstance(value, dict | list):
        if id(value) in above:
            return ("itself", above.index(id(value)))
        above = (*above, id(value))
    if isinstance(value, dict):
        return ("dict", [(typed(k, above), typed(v, above)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [typed(item, above) for item in value])
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    return (type(value).__name__, repr(value))


def load_both(text: str) -> tuple[Any, Any]:
    """Both loaders' documents, or both errors' types and messages."""
    answers = []
    for loader in (PyLoader, FastSafeLoader):
        try:
            answers.append(("ok", [typed(d) for d in yaml.load_all(text, Loader=loader)]))
        except Exception as error:
            answers.append(("error", type(error).__name__, str(error)))
    return answers[0], answers[1]


def assert_same_load(text: str) -> None:
    expected, got = load_both(text)
    assert got == expected, text


TRICKY_SCALARS = [
    *("yes", "No", "ON", "off", "y", "n", "true", "False", "~", "null", "Null", "", "-", "?"),
    *(
        "0",
        "00",
        "007",
        "010",
        "08",
        "0_10",
        "-0",
        "+12",
        "0x1F",
        "0o17",
        "0b101",
        "1_000",
        "190:20:30",
        "0.5e3",
    ),
    *("1e3", "-1.5", ".inf", "-.Inf", ".NaN", "1_000.5", "6.8523015e+5", "0.", "+.5"),
    *("2001-12-14", "2001-12-14t21:59:43.10-05:00", "2002-12-14 21:59:43.10 +5", "<<", "="),
    *("'quoted'", '"double"', "a: b", "- x", "# c", "x #y", "!tag", "&a", "*a", "%x", "@", "`"),
    *("é", "\u00a0", "١٢", "²", "line\nbreak", " lead", "trail ", "0.0.1", "1.2.3.4", "v1"),
]


@pytest.mark.parametrize("scalar", TRICKY_SCALARS)
def test_each_tricky_scalar_loads_the_same_plain_quoted_and_as_a_key(scalar: str) -> None:
    quoted = '"' + scalar.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    for text in (scalar, quoted):
        if "\n" in text:
            continue
        assert_same_load(f"v: {text}\n")
        assert_same_load(f"- {text}\n- [{text}]\n")
        assert_same_load(f"{text}: 1\n")
        assert_same_load(f"k: !!str {text}\n")


ODD_DOCUMENTS = [
    "a: &x {b: 1}\nc: *x\n",  # an alias: PyYAML shares the object
    "base: &b {x: 1, y: 2}\nmore:\n  <<: *b\n  y: 3\n",  # a merge key
    "r: &r [1, *r]\n",  # a recursive alias
    "t: 2001-12-14\nu: 2001-12-14t21:59:43.10-05:00\n",
    "s: !!set {a, b}\no: !!omap [a: 1, b: 2]\np: !!pairs [a: 1, a: 2]\n",
    "b: !!binary aGVsbG8=\n",
    "? [a, b]\n: 1\n",  # an unhashable key
    "? {a: 1}\n: 1\n",
    "i: !!int 0x1F\nf: !!float 1\nn: !!null ''\nbool: !!bool yes\n",
    "bad: !!int x\n",
    "bad: !!bool maybe\n",
    "x: !custom 1\n",
    "dup: 1\ndup: 2\n",
    "= : 1\nv: =\n",
    "---\na: 1\n---\n---\n- 1\n...\n",
    "a: [1, {b: [2, {c: null}]}]\n",
    "a: b: c\n",  # not YAML
    "a:\n- 1\n - 2\n",
    "%YAML 1.1\n---\na: 1\n",
    "{" * 200 + "}" * 200,
]


@pytest.mark.parametrize("text", ODD_DOCUMENTS)
def test_odd_documents_load_the_same_or_fail_the_same(text: str) -> None:
    assert_same_load(text)


def test_an_alias_is_the_same_object_as_with_pyyaml() -> None:
    for loader in (PyLoader, FastSafeLoader):
        shared = yaml.load("a: &x {b: 1}\nc: *x\n", Loader=loader)
        assert shared["a"] is shared["c"]
        itself = yaml.load("r: &r [1, *r]\n", Loader=loader)
        assert itself["r"][1] is itself["r"]


def test_the_real_world_corpus_loads_the_same() -> None:
    corpus = shared_path("realworld", what="the real-world corpus")
    files = sorted(p for p in corpus.rglob("*") if p.suffix in (".yaml", ".yml"))
    assert len(files) > 20
    for file in files:
        assert_same_load(file.read_text(encoding="utf-8"))


SCALAR_TEXT = st.one_of(st.sampled_from(TRICKY_SCALARS), st.text(max_size=12))
PLAIN = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False),
        SCALAR_TEXT,
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(
            st.one_of(SCALAR_TEXT, st.integers(), st.booleans(), st.none()), children, max_size=4
        ),
    ),
    max_leaves=20,
)
STYLES = [
    {"default_flow_style": False, "sort_keys": False, "allow_unicode": True},
    {"default_flow_style": True, "sort_keys": True},
    {"default_flow_style": None, "sort_keys": False, "explicit_start": True, "width": 1 << 16},
]


@settings(max_examples=300, deadline=None)
@given(st.lists(PLAIN, min_size=1, max_size=3), st.sampled_from(STYLES))
def test_plain_values_dump_to_the_same_text_and_load_back_the_same(
    documents: list[Any], style: dict[str, Any]
) -> None:
    expected = yaml.dump_all(documents, Dumper=NoAliasPyDumper, **style)
    assert yaml.dump_all(documents, Dumper=FastSafeDumper, **style) == expected
    assert_same_load(expected)


def test_other_types_and_shared_objects_dump_as_pyyaml_dumps_them() -> None:
    shared = {"a": 1}
    for value in ({"x": shared, "y": shared}, {"t": (1, 2)}, [1.5, float("inf"), -0.0]):
        for style in STYLES:
            expected = yaml.dump(value, Dumper=NoAliasPyDumper, **style)
            assert yaml.dump(value, Dumper=FastSafeDumper, **style) == expected


def test_a_manifest_file_reads_the_same(tmp_path: Path) -> None:
    text = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: t, labels: {app: t}}\n"
        "spec:\n  replicas: 2\n  template:\n    spec:\n      containers:\n"
        "      - name: c\n        resources: {limits: {nvidia.com/gpu: 1, cpu: 0.5}}\n"
    )
    assert_same_load(text)


KEY_TEXT = st.one_of(
    st.sampled_from(TRICKY_SCALARS),
    st.text(alphabet="abz09-_./ :#'\"é", max_size=8),
    st.from_regex(r"[a-z0-9][a-z0-9:/. -]{0,12}", fullmatch=True),
    st.text(alphabet="ab", min_size=119, max_size=140),
)
BLOCK_PLAIN = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), KEY_TEXT, st.floats(allow_nan=False)),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(KEY_TEXT, st.integers()), children, max_size=4),
    ),
    max_leaves=24,
)


def assert_same_block_dump(documents: list[Any]) -> None:
    expected = yaml.dump_all(documents, Dumper=NoAliasPyDumper, **BLOCK_OPTIONS)
    assert dump_block(documents) == expected


@settings(max_examples=400, deadline=None)
@given(st.lists(BLOCK_PLAIN, min_size=1, max_size=4))
def test_block_dumps_write_what_pyyaml_writes(documents: list[Any]) -> None:
    assert_same_block_dump(documents)


def test_the_real_world_corpus_dumps_the_same() -> None:
    corpus = shared_path("realworld", what="the real-world corpus")
    documents = [
        document
        for file in sorted(p for p in corpus.rglob("*") if p.suffix in (".yaml", ".yml"))
        for document in yaml.load_all(file.read_text(encoding="utf-8"), Loader=PyLoader)
        if document is not None
    ]
    assert len(documents) > 50
    assert_same_block_dump(documents)
