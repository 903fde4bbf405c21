"""Evaluating device selectors with cel-python, plus the Kubernetes CEL functions we emit.

cel-python implements the CEL language; Kubernetes adds libraries on top of it. The ones our
selectors use are added here as custom functions: `upperAscii`/`lowerAscii` (strings extension),
`quantity(...)` and `Quantity.compareTo(...)` (Kubernetes quantity library).
"""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import Any

import celpy
from celpy import celtypes

DRIVER = "hami-core-gpu.project-hami.io"
GI = 1 << 30
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40}


class Quantity(celtypes.IntType):
    """A byte or unit count; all quantities in these tests are whole numbers."""


def _quantity(text: celtypes.StringType) -> Quantity:
    for suffix, shift in _BINARY.items():
        if text.endswith(suffix):
            return Quantity(int(Fraction(text[: -len(suffix)]) * (1 << shift)))
    return Quantity(int(Fraction(str(text))))


def _compare_to(left: Quantity, right: Quantity) -> celtypes.IntType:
    if not isinstance(left, Quantity) or not isinstance(right, Quantity):
        raise TypeError("compareTo needs two quantities")
    return celtypes.IntType((left > right) - (left < right))


def _ascii(text: celtypes.StringType, upper: bool) -> celtypes.StringType:
    table = str.maketrans(
        "abcdefghijklmnopqrstuvwxyz" if upper else "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if upper else "abcdefghijklmnopqrstuvwxyz",
    )
    return celtypes.StringType(str(text).translate(table))


FUNCTIONS = {
    "upperAscii": lambda s: _ascii(s, upper=True),
    "lowerAscii": lambda s: _ascii(s, upper=False),
    "quantity": _quantity,
    "compareTo": _compare_to,
}
_ENV = celpy.Environment()


@functools.cache
def program(expression: str) -> Any:
    return _ENV.program(_ENV.compile(expression), functions=FUNCTIONS)


def hami_device(
    minor: int, product: str, memory: int, uuid: str | None = None, driver: str = DRIVER
) -> dict[str, Any]:
    """A device as the HAMi DRA driver publishes it in its ResourceSlice (docs/kubernetes-facts.md)."""
    return {
        "name": f"hami-gpu-{minor}",
        "driver": driver,
        "allowMultipleAllocations": True,
        "attributes": {
            driver: {
                "type": "hami-gpu",
                "uuid": uuid or f"GPU-{minor:08d}-aaaa-bbbb-cccc-{minor:012d}",
                "minor": minor,
                "productName": product,
                "brand": "Nvidia",
                "architecture": "Ampere",
                "cudaComputeCapability": "8.0.0",
                "driverVersion": "550.54.15",
                "cudaDriverVersion": "12.4.0",
                "pcieBusID": f"0000:{minor:02x}:00.0",
            }
        },
        "capacity": {driver: {"memory": memory, "cores": 100}},
    }


def _activation(device: dict[str, Any]) -> dict[str, Any]:
    cel_device = celpy.json_to_cel({k: v for k, v in device.items() if k != "capacity"})
    capacity = celtypes.MapType(
        {
            celtypes.StringType(domain): celtypes.MapType(
                {celtypes.StringType(k): Quantity(v) for k, v in values.items()}
            )
            for domain, values in device["capacity"].items()
        }
    )
    cel_device[celtypes.StringType("capacity")] = capacity
    return {"device": cel_device}


def evaluate(expression: str, device: dict[str, Any]) -> Any:
    """The CEL result; an evaluation error comes back as a CELEvalError value or raises."""
    return program(expression).evaluate(_activation(device))


def selects(expressions: list[str] | tuple[str, ...], device: dict[str, Any]) -> bool:
    """True when every selector is true for the device; an evaluation error fails the test."""
    for expression in expressions:
        result = evaluate(expression, device)
        if not isinstance(result, celtypes.BoolType):
            raise AssertionError(f"selector {expression!r} gave {result!r}, not a bool")
        if not result:
            return False
    return True
