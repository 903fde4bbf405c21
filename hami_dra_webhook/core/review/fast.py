"""The fast way to read the review of a pod CREATE: find what is read, decode it only when the
translation needs it.

msgspec reads the body into the structs below, skipping all but the few hundred bytes the
translation reads (`pod_view`), each value kept as its exact text (`Raw`): written back, they
are the translation cache's key, so a repeated pod is answered without decoding any of it.
Same answers, always: `decode_fast` returns None, and the caller parses the whole body
(`review.parse_review`), for every review that is not a pod CREATE of this shape and wherever it
cannot tell that the full parse would accept the body and read the same (invalid UTF-8, a number
that could overflow, nesting that could pass orjson's limit, a shape msgspec refuses).
`tests/core/review/test_decode_differential.py` checks that both paths give the same answers; the
reasoning in full: docs/design/2026-12-01-fast-review-reader.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

import msgspec
import orjson
from msgspec import UNSET, Meta, Raw, Struct, UnsetType

from hami_dra_webhook.core.review.wire import Request, parse_review
from hami_dra_webhook.core.translate.pod_view import READ_LABELS, pod_view, reads_annotation

Text = Raw | UnsetType  # a value read, as its JSON text; UNSET when the field is absent


class _Container(Struct, rename="camel"):
    name: Text = UNSET
    resources: Text = UNSET
    env: Text = UNSET
    security_context: Text = UNSET


class _Metadata(Struct, rename="camel"):
    namespace: Text = UNSET
    generate_name: Text = UNSET
    labels: dict[str, Raw] | UnsetType | None = UNSET
    annotations: dict[str, Raw] | UnsetType = UNSET


class _Spec(Struct, rename="camel"):
    node_name: Text = UNSET
    scheduler_name: Text = UNSET
    runtime_class_name: Text = UNSET
    resource_claims: Text = UNSET
    resources: Text = UNSET  # pod-level
    # Not read by the translation: where the GPU quota gate is added (admission/quota_gate.py).
    scheduling_gates: Text = UNSET
    init_containers: list[_Container] | UnsetType = UNSET
    containers: list[_Container] | UnsetType = UNSET


class _Pod(Struct):
    metadata: _Metadata | UnsetType = UNSET
    spec: _Spec | UnsetType = UNSET


class _Kind(Struct):
    group: str = ""
    version: str = ""
    kind: str = ""


class _Resource(Struct):
    group: str = ""
    version: str = ""
    resource: str = ""


class _UserInfo(Struct):
    username: Text = UNSET


class _Request(Struct, rename="camel"):
    uid: Annotated[str, Meta(min_length=1)]
    kind: _Kind
    operation: str
    object: _Pod
    resource: _Resource | None = None
    sub_resource: str | None = None
    name: str | None = None
    namespace: str | None = None
    old_object: None = None
    dry_run: bool = False
    user_info: _UserInfo | None = None


class _Review(Struct, rename="camel"):
    api_version: Literal["admission.k8s.io/v1"]
    kind: Literal["AdmissionReview"]
    request: _Request


class FastPod:
    """The pod of a fast-read review: what the use case reads of it, its cache key, and its
    view (decoded on first use)."""

    __slots__ = ("_spec", "_view", "container_count", "generate_name", "key", "namespace")

    def __init__(self, found: _Pod) -> None:
        self._view: dict[str, Any] | None = None
        metadata = found.metadata
        if metadata is not UNSET:
            # The labels and annotations not read are not in the key either.
            labels = metadata.labels
            if labels:  # most pods have none of the labels read: one set operation in C
                kept = READ_LABELS.intersection(labels)
                metadata.labels = {k: labels[k] for k in sorted(kept)} if kept else {}
            if metadata.annotations is not UNSET:
                read = {k: v for k, v in metadata.annotations.items() if reads_annotation(k)}
                metadata.annotations = read
        # The exact text of everything read, under the names read: equal keys, equal views.
        self.key = _KEY_PREFIX + _ENCODER.encode(found)
        self.namespace = _decoded(metadata.namespace) if metadata is not UNSET else None
        self.generate_name = _decoded(metadata.generate_name) if metadata is not UNSET else None
        spec = self._spec = found.spec
        self.container_count = 0
        if spec is not UNSET:
            for items in (spec.init_containers, spec.containers):
                self.container_count += 0 if items is UNSET else len(items)

    def cache_key(self, text_of: Callable[[Any], bytes]) -> bytes:
        """Its own key: the text of what is read, as the body wrote it."""
        return self.key

    def container_resources(self) -> Iterator[dict[str, Any]]:
        """Each container (init containers first) as far as the translation's count check reads
        it, `{"resources": ...}` as `pod_view` has it, decoded one at a time as asked: a pod of
        too many containers is decided from these (`pod_checks.too_many_containers`) without
        decoding the rest."""
        spec = self._spec
        if spec is UNSET:
            return
        for items in (spec.init_containers, spec.containers):
            for container in () if items is UNSET else items:
                resources = container.resources
                yield (
                    {} if resources is UNSET else {"resources": orjson.loads(memoryview(resources))}
                )

    def scheduling_gates(self) -> Any:
        """spec.schedulingGates as written (None when absent)."""
        spec = self._spec
        if spec is UNSET or spec.scheduling_gates is UNSET:
            return None
        return orjson.loads(memoryview(spec.scheduling_gates))

    def view(self) -> dict[str, Any]:
        """`pod_view` of the pod, as the full parse would have read it: the key is the JSON of
        the fields read, each value its text from the body, so orjson decodes each as the full
        parse does."""
        if self._view is None:
            self._view = pod_view(orjson.loads(memoryview(self.key)[len(_KEY_PREFIX) :]))
        return self._view


_DECODER: Final = msgspec.json.Decoder(_Review)
_KEY_PREFIX: Final = b"\0fast"  # no key of the full parse's (a JSON text) starts so
_ENCODER: Final = msgspec.json.Encoder()
# Digits read as '0', 'e' and 'E' as 'e', '[' and '{' as '[', every other byte as '.': one
# pass in C, then searches of its result find where a number could overflow and count the
# openings.
_SHAPES: Final = bytes(
    ord("0")
    if b in b"0123456789"
    else ord("e")
    if b in b"eE"
    else ord("[")
    if b in b"[{"
    else ord(".")
    for b in range(256)
)
_OVERFLOWING_DIGITS: Final = b"0" * 309  # 1e308 has 309 digits
_MOST_OPENINGS: Final = 1000  # under orjson's depth limit (1,024), whatever the nesting
# 1,025 levels, the fewest orjson refuses, where the decoder skips a field.
_DEEPEST_REFUSED: Final = b'{"x":' + b"[" * 1024 + b"]" * 1024 + b"}"
_NUMBER_START: Final = frozenset(b":,[")
_IN_NUMBER: Final = frozenset(b"0123456789.-")
_WHITESPACE: Final = frozenset(b" \t\n\r")
# Past this many digit-then-e places (in uids and digests: a few), the full parse decides
# rather than a loop in Python over each.
_MOST_PLACES: Final = 32


@dataclass(slots=True, frozen=True)
class FastRequest:
    """A pod CREATE's request as the fast reader reads it (`review.Request`); its pod is the
    `FastPod` beside it, so `object` is None."""

    uid: str
    name: str | None
    namespace: str | None
    dry_run: bool
    user: str
    resource_name: str
    operation: str = "CREATE"
    object: None = None
    old_object: None = None
    is_pod: bool = True
    adds_ephemeral_containers: bool = False


def read_review(body: bytes) -> tuple[Request, FastPod | None]:
    """The request of an AdmissionReview body, with its pod read fast where that reads the same
    as the full parse (then the request's `object` is None); raises `MalformedReview` as the
    full parse does."""
    fast = decode_fast(body)
    if fast is not None:
        return fast
    return parse_review(body).request, None


def decode_fast(body: bytes) -> tuple[FastRequest, FastPod] | None:
    """A pod CREATE's request (its `object` left None) and its pod, read fast; None where only
    the full parse can tell (see above)."""
    if not body.isascii():
        try:
            body.decode()
        except UnicodeDecodeError:
            return None
    shapes = body.translate(_SHAPES)
    if _may_overflow(body, shapes):
        return None
    if shapes.count(b"[") > _MOST_OPENINGS and not _msgspec_refuses_deeper():
        return None
    try:
        found = _DECODER.decode(body).request
        kind = found.kind
        if kind.group or kind.kind != "Pod" or found.sub_resource or found.operation != "CREATE":
            return None
        pod = FastPod(found.object)
        request = FastRequest(
            uid=found.uid,
            name=found.name,
            namespace=found.namespace,
            dry_run=found.dry_run,
            user=_user(found.user_info),
            resource_name=_resource_name(found.resource),
        )
    except (msgspec.DecodeError, orjson.JSONDecodeError, RecursionError):
        return None
    return request, pod


def _msgspec_refuses_deeper() -> bool:
    """Whether msgspec, called from here, refuses every body that nests deeper than orjson
    accepts (then it, not a count of openings, tells where the full parse must decide)."""
    try:
        _DECODER.decode(_DEEPEST_REFUSED)
    except RecursionError:
        return True
    except msgspec.DecodeError:
        return False  # past 1,025 levels: refused for its shape, not its depth
    return False


def _may_overflow(body: bytes, shapes: bytes) -> bool:
    """Whether a number in `body` (whose `_SHAPES` are `shapes`) could overflow a double (or
    there are too many places to look at)."""
    if _OVERFLOWING_DIGITS in shapes:
        return True
    place = shapes.find(b"0e")
    for _ in range(_MOST_PLACES):
        if place < 0:
            return False
        if _ends_a_mantissa(body, place):
            return True
        place = shapes.find(b"0e", place + 2)
    return place >= 0


def _ends_a_mantissa(body: bytes, digit: int) -> bool:
    """Whether the digit at `digit` ends a JSON number's mantissa: before its digits, sign and
    point, past whitespace, is `:`, `,`, `[` or the start. (In a string such as "a:1e5" it
    looks like one: the full parse then reads the body, which is only slower.)"""
    start = digit
    while start > 0 and body[start - 1] in _IN_NUMBER:
        start -= 1
    while start > 0 and body[start - 1] in _WHITESPACE:
        start -= 1
    return start == 0 or body[start - 1] in _NUMBER_START


def _decoded(text: Text) -> Any:
    return None if text is UNSET else orjson.loads(memoryview(text))


def _resource_name(found: _Resource | None) -> str:
    """As `AdmissionRequest.resource_name` (no subresource here)."""
    if found is None:
        return ""
    return "/".join(part for part in (found.group, found.version, found.resource) if part)


def _user(found: _UserInfo | None) -> str:
    """As `AdmissionRequest.user`."""
    name = None if found is None else _decoded(found.username)
    return name if isinstance(name, str) else ""
