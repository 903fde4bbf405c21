"""CEL source for device selectors, built from escaped literals, never by pasting user text."""

from __future__ import annotations

from collections.abc import Iterable

# Characters that CEL string literals may carry as they are; everything else is escaped.
_SAFE_ASCII = frozenset(chr(c) for c in range(0x20, 0x7F)) - {'"', "\\"}


class CelLiteralError(ValueError):
    """A value that cannot become a CEL string literal (it holds a lone UTF-16 surrogate)."""


def string_literal(value: str) -> str:
    """A double-quoted CEL string literal that evaluates to exactly `value`.

    Quotes, backslashes, control and non-ASCII characters are escaped, so no value can end the
    literal early and widen the expression it sits in.
    """
    parts = ['"']
    for char in value:
        if char in _SAFE_ASCII:
            parts.append(char)
        elif char in ('"', "\\"):
            parts.append("\\" + char)
        else:
            code = ord(char)
            if 0xD800 <= code <= 0xDFFF:
                raise CelLiteralError(f"the value holds an invalid character U+{code:04X}")
            parts.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
    parts.append('"')
    return "".join(parts)


def string_list(values: Iterable[str]) -> str:
    return "[" + ", ".join(string_literal(v) for v in values) + "]"


def attribute(driver: str, name: str) -> str:
    return f"device.attributes[{string_literal(driver)}].{name}"


def capacity(driver: str, name: str) -> str:
    return f"device.capacity[{string_literal(driver)}].{name}"


def driver_device_of_type(driver: str, type_attribute: str, type_value: str) -> str:
    # `device.driver` first: && absorbs the error an absent attribute domain would raise, so the
    # selector stays correct under a DeviceClass that also selects other drivers' devices.
    return (
        f"device.driver == {string_literal(driver)} && "
        f"{attribute(driver, type_attribute)} == {string_literal(type_value)}"
    )


def attribute_in(driver: str, name: str, values: Iterable[str]) -> str:
    return f"{attribute(driver, name)} in {string_list(values)}"


def legacy_type_matches(driver: str, name: str, fragments: Iterable[str]) -> str:
    """Legacy HAMi's type check: `NVIDIA-` prefixed NVML name, upper-cased, contains a fragment.

    The fragments must already be upper-cased (ASCII) by the caller.
    """
    product = attribute(driver, name)
    legacy_type = f'({product}.startsWith("NVIDIA") ? {product} : "NVIDIA-" + {product})'
    return f"{string_list(fragments)}.exists(f, {legacy_type}.upperAscii().contains(f))"


def negate(expression: str) -> str:
    return f"!({expression})"


def capacity_equals(driver: str, name: str, quantity: str) -> str:
    return f"{capacity(driver, name)}.compareTo(quantity({string_literal(quantity)})) == 0"
