"""Legacy HAMi pod annotations become CEL device selectors (or warnings where DRA has no match)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from hami_dra_webhook.core.model import cel
from hami_dra_webhook.core.model.types import Attention, NotConvertible
from hami_dra_webhook.core.settings.policy import Policy

USE_UUID = "nvidia.com/use-gpuuuid"
NOUSE_UUID = "nvidia.com/nouse-gpuuuid"
USE_TYPE = "nvidia.com/use-gputype"
NOUSE_TYPE = "nvidia.com/nouse-gputype"
VGPU_MODE = "nvidia.com/vgpu-mode"
NUMA_BIND = "nvidia.com/numa-bind"
GPU_SCHEDULER_POLICY = "hami.io/gpu-scheduler-policy"
NODE_SCHEDULER_POLICY = "hami.io/node-scheduler-policy"
DEVICE_SCORING_WEIGHTS = "hami.io/device-scoring-weights"  # HAMi v2.10: slot=,core=,memory=
HAMI_CORE_MODE = "hami-core"
MAX_SELECTOR_LENGTH = 10 * 1024
# Legacy values are short lists (a UUID is 40 characters, a type a few words): 4 KiB holds ~100
# UUIDs. Longer ones are refused before anything is built or kept from them.
MAX_ANNOTATION_VALUE = 4096
# Filters are cached for annotation values this short in all (replicas repeat them); longer
# ones are built each time, so that the cache holds at most ~1024 x (1 KiB + its selectors).
_CACHED_VALUES_UP_TO = 1024

_NOT_HONOURED = {
    NUMA_BIND: "NUMA binding is not honoured under DRA",
    GPU_SCHEDULER_POLICY: "GPU binpack/spread/mutex policy is not honoured under DRA",
    NODE_SCHEDULER_POLICY: "node binpack/spread policy is not honoured under DRA",
    DEVICE_SCORING_WEIGHTS: "GPU scoring weights are not honoured under DRA",
}
# Go's strconv.ParseBool, which HAMi v2.10 applies to numa-bind: only these ask for NUMA
# binding; any other value (`false`, `0`, a typo) was a no-op in legacy HAMi.
GO_TRUE = frozenset(("1", "t", "T", "TRUE", "true", "True"))


def _asks(key: str, value: Any) -> bool:
    """Whether an annotation DRA cannot honour asks for something (numa-bind only when true)."""
    if value is None:
        return False
    return value in GO_TRUE if key == NUMA_BIND else True


@dataclass(frozen=True, slots=True)
class DeviceFilter:
    """The selectors every request of the pod's claims carries."""

    selectors: tuple[str, ...]
    warnings: tuple[str, ...]


def split_list(value: str) -> list[str]:
    """Legacy v2.10 list parsing: comma-split, each item trimmed, empty items dropped."""
    return [item.strip() for item in value.split(",") if item.strip()]


def ascii_upper(value: str) -> str:
    # Only ASCII letters, like CEL's upperAscii() on the device side: no fragment can grow.
    return value.translate(_ASCII_UPPER)


_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


_VALUED = (USE_UUID, NOUSE_UUID, USE_TYPE, NOUSE_TYPE, VGPU_MODE)
SELECTOR_ANNOTATIONS = (*_VALUED, *_NOT_HONOURED)


def device_filter(annotations: dict[str, Any], policy: Policy) -> DeviceFilter:
    """Selectors and warnings from the pod's annotations (cached: replicas repeat them)."""
    values = tuple(annotations.get(key) for key in _VALUED)
    size = 0
    for key, value in zip(_VALUED, values, strict=True):
        if isinstance(value, str):
            if len(value) > MAX_ANNOTATION_VALUE:
                raise NotConvertible(
                    f"annotation {key} is {len(value)} characters long; legacy values are short"
                    f" UUID or type lists (at most {MAX_ANNOTATION_VALUE}): list fewer",
                    code=422,
                    reason="annotation-too-long",
                )
            size += len(value)
    # Only whether they are set counts for the annotations DRA cannot honour, so that is all
    # that is kept of them (their values may be megabytes).
    present = tuple(_asks(key, annotations.get(key)) for key in _NOT_HONOURED)
    relevant = (*values, *present)
    if size <= _CACHED_VALUES_UP_TO:
        try:
            return _device_filter(relevant, policy)
        except TypeError:  # an unhashable annotation value (not a string): not worth caching
            pass
    return _build_filter(_as_annotations(relevant), policy)


def _as_annotations(relevant: tuple[Any, ...]) -> dict[str, Any]:
    found = dict(zip(SELECTOR_ANNOTATIONS, relevant, strict=True))
    for key in _NOT_HONOURED:
        found[key] = "true" if found[key] else None
    return found


@functools.lru_cache(maxsize=1024)
def _device_filter(relevant: tuple[Any, ...], policy: Policy) -> DeviceFilter:
    return _build_filter(_as_annotations(relevant), policy)


def _build_filter(annotations: dict[str, Any], policy: Policy) -> DeviceFilter:
    web = policy.webhook
    driver, names = web.driver_name, web.attributes
    selectors = [cel.driver_device_of_type(driver, names.type, web.device_type)]
    warnings: list[str] = []

    def items(key: str) -> list[str] | None:
        value = annotations.get(key)
        if value is None:
            return None
        found = split_list(value) if isinstance(value, str) else []
        if not found:
            warnings.append(f"annotation {key} lists nothing, so it adds no constraint")
            return None
        return found

    try:
        if (uuids := items(USE_UUID)) is not None:
            selectors.append(cel.attribute_in(driver, names.uuid, uuids))
        if (uuids := items(NOUSE_UUID)) is not None:
            selectors.append(cel.negate(cel.attribute_in(driver, names.uuid, uuids)))
        if (types := items(USE_TYPE)) is not None:
            fragments = [ascii_upper(t) for t in types]
            warnings += _never_matching(USE_TYPE, types)
            selectors.append(cel.legacy_type_matches(driver, names.product_name, fragments))
        if (types := items(NOUSE_TYPE)) is not None:
            fragments = [ascii_upper(t) for t in types]
            warnings += _never_matching(NOUSE_TYPE, types)
            selectors.append(
                cel.negate(cel.legacy_type_matches(driver, names.product_name, fragments))
            )
    except cel.CelLiteralError as error:
        raise NotConvertible(
            f"a GPU annotation cannot be used: {error}", code=422, reason="bad-annotation"
        ) from error
    for selector in selectors:
        if len(selector.encode()) > MAX_SELECTOR_LENGTH:
            raise NotConvertible(
                "GPU annotations make a CEL selector longer than the 10 KiB DRA allows;"
                " list fewer UUIDs or types",
                code=422,
                reason="selector-too-long",
            )
    warnings += _unsupported(annotations, policy)
    return DeviceFilter(selectors=tuple(selectors), warnings=tuple(warnings))


# HAMi 2.7 and earlier named a GPU's type "NVIDIA-" + its NVML name even when that name began
# with NVIDIA ("NVIDIA-NVIDIA L4"); since v2.8 (HAMi PR #1139) the prefix is added only to names
# that do not start with NVIDIA, as our CEL does (docs/translation.md: use-gputype).
_DOUBLED_PREFIX = "NVIDIA-NVIDIA"


# NVML names a GPU with spaces between its words ("NVIDIA GeForce RTX 4090", "NVIDIA H20",
# "Tesla V100-PCIE-32GB"): a hyphen after one of these words stands for a space and matches no
# GPU, in legacy HAMi or under DRA. "NVIDIA-" before a model number is one too: NVML names of
# such GPUs begin with "NVIDIA ", so no type has "NVIDIA-H20" in it ("NVIDIA-Tesla ..." does).
_HYPHEN_FOR_SPACE = re.compile(
    r"(?i)\b(?:GeForce|RTX|GTX|Tesla|Quadro|TITAN)-|\bNVIDIA-(?=[A-Z]{1,3}\d|RTX\b|RTX-|GeForce-)"
)
_SPACED = re.compile(r"(?i)\b(NVIDIA|GeForce|RTX|GTX|Tesla|Quadro|TITAN)-(?!Tesla|Quadro|TITAN)")


def _never_matching(key: str, types: list[str]) -> list[str]:
    """A warning for each type fragment no GPU's type can contain (HAMi <= 2.7 naming, or
    hyphens for spaces)."""
    warnings: list[str] = []
    effect = "selects no GPU" if key == USE_TYPE else "excludes nothing"
    short = key.removeprefix("nvidia.com/")
    for fragment in types:
        at = ascii_upper(fragment).find(_DOUBLED_PREFIX)
        if at < 0:
            if _HYPHEN_FOR_SPACE.search(fragment):
                fixed = _SPACED.sub(r"\1 ", fragment)
                warnings.append(
                    Attention(
                        f"{short} {fragment!r} {effect} (NVML names GPUs with spaces, not"
                        f" hyphens, in legacy HAMi and under DRA): write {fixed!r}"
                    )
                )
            continue
        fixed = fragment[:at] + fragment[at + len("NVIDIA-") :]
        warnings.append(
            Attention(
                f"{short} {fragment!r} {effect} (HAMi >= 2.8 names types once): write {fixed!r}"
            )
        )
    return warnings


MIG_MODE = "mig"


def _unsupported(annotations: dict[str, Any], policy: Policy) -> list[str]:
    mode = annotations.get(VGPU_MODE)
    if mode is not None and (not isinstance(mode, str) or HAMI_CORE_MODE not in mode):
        if mode == MIG_MODE and policy.webhook.mig_mode == HAMI_CORE_MODE:
            return [
                Attention(
                    f"{VGPU_MODE}=mig: converted to a {HAMI_CORE_MODE} share of the same memory"
                    " (software limits, not MIG isolation)"
                ),
                *(n for n in unsupported_annotations(annotations) if VGPU_MODE not in n),
            ]
        mig = (
            "; or set hamiDraWebhook.migMode: hami-core to convert it to a HAMi-core share of"
            " the same memory (software limits instead of MIG isolation)"
            if mode == MIG_MODE
            else ""
        )
        raise NotConvertible(
            f"annotation {VGPU_MODE}={str(mode)[:80]} asks for a GPU mode this DRA driver does not"
            f" offer (only {HAMI_CORE_MODE}); add {HAMI_CORE_MODE} or remove the annotation{mig}",
            code=422,
            reason="unsupported-gpu-mode",
        )
    return unsupported_annotations(annotations)


def unsupported_annotations(annotations: dict[str, Any]) -> list[str]:
    """A note for each annotation DRA cannot honour (the pod converts without it)."""
    notes = []
    if annotations.get(VGPU_MODE) is not None:
        notes.append(f"annotation {VGPU_MODE}: DRA offers only {HAMI_CORE_MODE} devices")
    for key, text in _NOT_HONOURED.items():
        if _asks(key, annotations.get(key)):
            notes.append(f"annotation {key}: {text}")
    return notes
