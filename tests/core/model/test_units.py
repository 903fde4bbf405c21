"""Quantities, CEL literals and JSON patches: the small parts the translation stands on."""

from __future__ import annotations

import copy
from fractions import Fraction

import jsonpatch
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hami_dra_webhook.core.model import cel, patch
from hami_dra_webhook.core.model.quantity import (
    QuantityError,
    format_bytes,
    format_mib,
    parse_byte_size,
    parse_plain_integer,
    parse_quantity,
)
from hami_dra_webhook.core.translate.claims import Taken, claim_name
from tests.support.cel_k8s import program
from tests.support.dra_limits import DNS_LABEL


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", 1),
        ("1.5", Fraction(3, 2)),
        ("500m", Fraction(1, 2)),
        ("16Gi", 16 << 30),
        ("1e3", 1000),
        ("2k", 2000),
        (".5", Fraction(1, 2)),
        ("-1", -1),
        ("1E-3", Fraction(1, 1000)),
        # every suffix kube-apiserver knows
        ("3Ki", 3 << 10),
        ("3Mi", 3 << 20),
        ("2Ti", 2 << 40),
        ("1Pi", 1 << 50),
        ("1Ei", 1 << 60),
        ("4n", Fraction(4, 10**9)),
        ("4u", Fraction(4, 10**6)),
        ("5M", 5 * 10**6),
        ("5G", 5 * 10**9),
        ("5T", 5 * 10**12),
        ("2P", 2 * 10**15),
        ("1E", 10**18),
    ],
)
def test_parse_quantity(text: str, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("8000", 8000),
        (8000, 8000),
        ("+3", 3),
        (" 7 ", 7),
        (2.0, 2),
        ("0", 0),
        # kube-apiserver sends quantities in canonical form: 3000 arrives as "3k".
        ("3k", 3000),
        ("1M", 1_000_000),
        ("2e3", 2000),
        ("1.5k", 1500),
        ("2147483647", 2147483647),
    ],
)
def test_plain_integers(value: object, expected: int) -> None:
    assert parse_plain_integer(value) == expected


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("16Gi", "binary unit suffix"),
        ("2Ki", "binary unit suffix"),
        ("16G", "larger than 2147483647"),
        (2147483648, "larger than 2147483647"),
        ("1e-3", "not a whole number"),
        ("-3", "negative"),
        (-3, "negative"),
        ("0.5", "not a whole number"),
        (0.5, "not a whole number"),
        ("abc", "not a Kubernetes quantity"),
        (True, "boolean"),
        (None, "NoneType"),
        ("", "not a Kubernetes quantity"),
    ],
)
def test_values_legacy_would_misread_are_refused(value: object, reason: str) -> None:
    with pytest.raises(QuantityError, match=reason):
        parse_plain_integer(value)


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (1023, "1023"),
        (1 << 10, "1Ki"),
        (3 << 20, "3Mi"),
        (80 << 30, "80Gi"),
        (1 << 40, "1Ti"),
        (1536 << 30, "1536Gi"),
        (2 << 50, "2Pi"),  # Kubernetes canonical form
        (3 << 60, "3Ei"),
    ],
)
def test_byte_sizes_format_to_the_largest_exact_binary_unit(size: int, text: str) -> None:
    assert format_bytes(size) == text
    assert parse_byte_size(text) == size


@pytest.mark.parametrize(
    ("mebibytes", "text"), [(3000, "3000Mi"), (1024, "1Gi"), (40960, "40Gi"), (1, "1Mi")]
)
def test_mib_are_written_as_kube_apiserver_stores_them(mebibytes: int, text: str) -> None:
    """kube-apiserver keeps a quantity in its canonical form (seen on 1.37: 40960Mi is stored
    as 40Gi); a template written that way is stored byte for byte as written."""
    assert format_mib(mebibytes) == text
    assert format_bytes(0) == "0"  # no suffix divides nothing into a whole number


def test_byte_sizes() -> None:
    assert parse_byte_size("80Gi") == 80 << 30
    assert parse_byte_size(85899345920) == 80 << 30
    assert format_bytes(80 << 30) == "80Gi" and format_bytes(15109 << 20) == "15109Mi"
    assert format_bytes(1 << 40) == "1Ti" and format_bytes(1000) == "1000"
    with pytest.raises(QuantityError):
        parse_byte_size("1.5")


@given(st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=40))
def test_cel_string_literals_round_trip(value: str) -> None:
    literal = cel.string_literal(value)
    assert program(f"{literal} == x").evaluate(
        {"x": __import__("celpy").celtypes.StringType(value)}
    )


def test_lone_surrogates_are_refused() -> None:
    with pytest.raises(cel.CelLiteralError):
        cel.string_literal("a\ud800")


@pytest.mark.parametrize(
    ("name", "taken", "expected"),
    [
        ("cuda", set(), "cuda-gpu"),
        ("cuda", {"cuda-gpu"}, "cuda-gpu-2"),
        ("cuda", {"cuda-gpu", "cuda-gpu-2"}, "cuda-gpu-3"),
        ("x" * 63, set(), "x" * 59 + "-gpu"),
        ("x" * 63, {"x" * 59 + "-gpu"}, "x" * 59 + "-g-2"),
        ("Weird_Name!", set(), "weird-name-gpu"),
        ("---", set(), "container-gpu"),
    ],
)
def test_claim_names_are_unique_dns_labels(name: str, taken: set[str], expected: str) -> None:
    result = claim_name(name, Taken(taken))
    assert result == expected
    assert DNS_LABEL.match(result)


DOCUMENT = {
    "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1", "a~b": "2"}}}]},
    "metadata": {},
}


def test_patch_matches_jsonpatch_and_leaves_input_alone() -> None:
    ops = [
        patch.remove(
            patch.pointer("spec", "containers", 0, "resources", "limits", "nvidia.com/gpu")
        ),
        patch.remove(patch.pointer("spec", "containers", 0, "resources", "limits", "a~b")),
        patch.add("/spec/containers/0/env", [{"name": "A", "value": "1"}]),
        patch.add("/spec/containers/0/env/-", {"name": "B", "value": "2"}),
        patch.add("/spec/containers/0/env/0", {"name": "Z", "value": "0"}),
        patch.add("/metadata/labels", {"x": "y"}),
        {"op": "replace", "path": "/spec/containers/0/env/1", "value": {"name": "A", "value": "9"}},
    ]
    assert ops[0]["path"] == "/spec/containers/0/resources/limits/nvidia.com~1gpu"
    assert ops[1]["path"] == "/spec/containers/0/resources/limits/a~0b"
    before = copy.deepcopy(DOCUMENT)
    assert patch.apply(DOCUMENT, ops) == jsonpatch.apply_patch(DOCUMENT, ops)
    assert before == DOCUMENT
    assert patch.rebase(ops[:1], "/spec/template")[0]["path"].startswith("/spec/template/spec/")
