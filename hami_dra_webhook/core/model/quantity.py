"""Kubernetes resource quantities, only as far as legacy HAMi values and device sizes need them."""

from __future__ import annotations

import re
from fractions import Fraction

MIB = 1 << 20
MAX_LEGACY_VALUE = (1 << 31) - 1  # legacy HAMi keeps these values in int32

# The grammar of k8s.io/apimachinery/pkg/api/resource.ParseQuantity.
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$"
)
_PLAIN_INTEGER = re.compile(r"^\+?[0-9]+$")
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


class QuantityError(ValueError):
    """Why a value is not what a legacy resource accepts; `reason` completes 'the value ...'."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def parse_quantity(text: str) -> Fraction:
    """Exact value of a Kubernetes quantity string such as `80Gi`, `1.5`, `500m` or `1e3`."""
    match = _QUANTITY.match(text.strip())
    if match is None:
        raise QuantityError("is not a Kubernetes quantity")
    number = Fraction(match["number"])
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * (1 << _BINARY[suffix])
    if suffix in _DECIMAL:
        return number * Fraction(10) ** _DECIMAL[suffix]
    return number * Fraction(10) ** int(suffix[1:])


def parse_plain_integer(value: object) -> int:
    """A non-negative whole number, as legacy HAMi reads its five resources (`Quantity.Value()`).

    kube-apiserver hands a webhook every quantity in canonical form: `3000` arrives as `"3k"`,
    `1000000` as `"1M"`. Decimal suffixes and exponents are therefore only another way to write
    a whole number and are accepted. Binary suffixes (`16Gi`) are refused: they are never the
    canonical form of a plain integer, so the user wrote one, and gpumem counts MiB, not bytes.
    Values above `MAX_LEGACY_VALUE` are refused: legacy HAMi reads them as int32 and drops them.
    """
    if isinstance(value, bool):
        raise QuantityError("is a boolean, not a number")
    if isinstance(value, int):
        return _in_range(value)
    if isinstance(value, float):
        if not value.is_integer():
            raise QuantityError("is not a whole number" if value >= 0 else "is negative")
        return _in_range(int(value))
    if not isinstance(value, str):
        raise QuantityError(f"has type {type(value).__name__}, not a quantity string")
    text = value.strip()
    if _PLAIN_INTEGER.match(text):
        return _in_range(int(text))
    match = _QUANTITY.match(text)
    if match is not None and match["suffix"] in _BINARY:
        raise QuantityError(f"has a binary unit suffix ({match['suffix']}); write a plain integer")
    exact = parse_quantity(text)
    if exact < 0:
        raise QuantityError("is negative")
    if exact.denominator != 1:
        raise QuantityError("is not a whole number")
    return _in_range(int(exact))


def _in_range(number: int) -> int:
    if number < 0:
        raise QuantityError("is negative")
    if number > MAX_LEGACY_VALUE:
        raise QuantityError(
            f"is larger than {MAX_LEGACY_VALUE}, the largest value legacy HAMi reads"
        )
    return number


def parse_byte_size(text: str | int) -> int:
    """A device memory size in bytes, from a quantity such as `80Gi` or `85899345920`."""
    exact = Fraction(text) if isinstance(text, int) else parse_quantity(str(text))
    if exact.denominator != 1 or exact <= 0:
        raise QuantityError("is not a positive whole number of bytes")
    return int(exact)


def format_mib(mebibytes: int) -> str:
    """MiB as kube-apiserver stores the quantity (its canonical form: 40960 -> 40Gi, 3000 ->
    3000Mi), so that a template is stored exactly as the webhook writes it."""
    return format_bytes(mebibytes * MIB)


def format_bytes(size: int) -> str:
    """The shortest exact quantity for a byte count in binary units: Kubernetes' canonical
    form of a binary quantity (the largest suffix that leaves a whole number)."""
    for suffix, shift in (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)):
        if size and size % (1 << shift) == 0:
            return f"{size >> shift}{suffix}"
    return str(size)
