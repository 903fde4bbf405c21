"""Kubernetes resource quantities, only as far as legacy HAMi values and device sizes need them."""

from __future__ import annotations

import re
from fractions import Fraction

MIB = 1 << 20

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
    """A non-negative integer written without suffix, decimal point or exponent.

    Legacy HAMi reads its five resources as plain integers; anything else is refused here because
    kube-apiserver would refuse it too (or, for gpumem, legacy HAMi would misread it silently).
    """
    if isinstance(value, bool):
        raise QuantityError("is a boolean, not a number")
    if isinstance(value, int):
        if value < 0:
            raise QuantityError("is negative")
        return value
    if isinstance(value, float):
        if value < 0:
            raise QuantityError("is negative")
        if value.is_integer():
            return int(value)
        raise QuantityError("is not a whole number")
    if not isinstance(value, str):
        raise QuantityError(f"has type {type(value).__name__}, not a quantity string")
    text = value.strip()
    if _PLAIN_INTEGER.match(text):
        return int(text)
    exact = parse_quantity(text)
    if exact < 0:
        raise QuantityError("is negative")
    if exact.denominator != 1:
        raise QuantityError("is not a whole number")
    raise QuantityError("has a unit suffix or exponent; write a plain integer")


def parse_byte_size(text: str | int) -> int:
    """A device memory size in bytes, from a quantity such as `80Gi` or `85899345920`."""
    exact = Fraction(text) if isinstance(text, int) else parse_quantity(str(text))
    if exact.denominator != 1 or exact <= 0:
        raise QuantityError("is not a positive whole number of bytes")
    return int(exact)


def format_mib(mebibytes: int) -> str:
    return f"{mebibytes}Mi"


def format_bytes(size: int) -> str:
    """The shortest exact quantity for a byte count, in the binary units NVML sizes use."""
    for suffix, shift in (("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)):
        if size % (1 << shift) == 0:
            return f"{size >> shift}{suffix}"
    return str(size)
