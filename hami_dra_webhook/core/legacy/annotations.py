"""Reading a vendor's list annotations (UUIDs, types) as legacy HAMi v2.10 does, bounded."""

from __future__ import annotations

from typing import Any

from hami_dra_webhook.core.legacy.selectors import MAX_ANNOTATION_VALUE, split_list
from hami_dra_webhook.core.model import cel
from hami_dra_webhook.core.model.types import NotConvertible

# Every vendor annotation a translation reads (the cache key keeps these,
# core/translate/pod_view.py), besides Ascend's per-chip `hami.io/use-<commonWord>-uuid` and
# `hami.io/no-use-...-uuid`.
VENDOR_ANNOTATIONS = (
    "hygon.com/use-gpuuuid",
    "hygon.com/nouse-gpuuuid",
    "hygon.com/use-dcutype",
    "hygon.com/use-hcutype",
    "hygon.com/nouse-dcutype",
    "hygon.com/nouse-hcutype",
    "huawei.com/vnpu-mode",
    "amd.com/use-gpu-uuid",
    "amd.com/nouse-gpu-uuid",
    "amd.com/use-gputype",
    "amd.com/nouse-gputype",
    "aws.amazon.com/use-neuron-uuid",
    "aws.amazon.com/nouse-neuron-uuid",
)


def is_ascend_uuid_key(key: str) -> bool:
    return key.startswith(("hami.io/use-", "hami.io/no-use-")) and key.endswith("-uuid")


def annotation_items(annotations: dict[str, Any], key: str, warnings: list[str]) -> list[str]:
    """The items of a comma list annotation (trimmed, empty ones dropped); [] when absent."""
    value = annotations.get(key)
    if value is None:
        return []
    if isinstance(value, str) and len(value) > MAX_ANNOTATION_VALUE:
        raise NotConvertible(
            f"annotation {key} is {len(value)} characters long; legacy values are short"
            f" UUID or type lists (at most {MAX_ANNOTATION_VALUE}): list fewer",
            code=422,
            reason="annotation-too-long",
        )
    items = split_list(value) if isinstance(value, str) else []
    if not items:
        warnings.append(f"annotation {key} lists nothing, so it adds no constraint")
    return items


def literal_list(key: str, items: list[str]) -> str:
    """A CEL list of string literals, or a refusal naming the annotation it came from."""
    try:
        return cel.string_list(items)
    except cel.CelLiteralError as error:
        raise NotConvertible(
            f"annotation {key} cannot be used: {error}", code=422, reason="bad-annotation"
        ) from error
