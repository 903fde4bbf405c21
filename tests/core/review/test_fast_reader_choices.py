"""core/review/fast.py's choices of where the full parse must decide (a number that could
overflow) and of what the fast pod holds. Either way the answer is the same
(tests/core/review/test_decode_differential.py); these pin that the fast path is taken wherever it
can be, so that a normal review is never read twice. (Whether msgspec refuses deep nesting
depends on the stack's depth when it is asked: not pinned here.)"""

from __future__ import annotations

import json
from typing import Any

from hami_dra_webhook.core.review import fast as fast_reader
from hami_dra_webhook.core.review.fast import (
    _ends_a_mantissa,
    _may_overflow,
    decode_fast,
)
from tests.support.reviews import replica_pod, review


def _overflows(body: bytes) -> bool:
    return _may_overflow(body, body.translate(fast_reader._SHAPES))


def test_an_exponent_ends_a_mantissa_only_after_a_value_start() -> None:
    for body in (b"1e5", b'{"a":1e5}', b'{"a": \t\n\r1e5}', b"[1e5]", b"[0,-1.5e3]"):
        assert _overflows(body), body
    for body in (b'{"a":"x1e5"}', b'{"a":"1e5"}', b'{"uid":"9e8f"}'):
        assert not _overflows(body), body
    digit = b'{"a":12e5}'.index(b"2")
    assert _ends_a_mantissa(b'{"a":12e5}', digit)
    assert not _ends_a_mantissa(b'{"a":"12e5"}', digit + 1)
    assert _ends_a_mantissa(b"7e1", 0)


def test_309_digits_could_overflow_and_308_cannot() -> None:
    assert _overflows(b'{"a":' + b"1" * 309 + b"}")
    assert not _overflows(b'{"a":' + b"1" * 308 + b"}")


def test_past_32_places_to_look_at_the_full_parse_decides() -> None:
    inside = ",".join(f'"{i}e"' for i in range(32))
    assert not _overflows(('{"a":[' + inside + "]}").encode())
    more = ",".join(f'"{i}e"' for i in range(33))
    assert _overflows(('{"a":[' + more + "]}").encode())


def _body(document: dict[str, Any]) -> bytes:
    return json.dumps(document).encode()


def test_a_normal_pod_create_is_read_fast() -> None:
    pod = replica_pod(labels={"app": "a", "hami.io/webhook": "ignore"})
    pod["spec"]["initContainers"] = [{"name": "setup", "image": "i"}]
    found = decode_fast(_body(review(pod)))
    assert found is not None
    request, fast = found
    assert request.name == "" and request.namespace == "team-a"
    assert request.user == "system:serviceaccount:kube-system:replicaset-controller"
    assert request.resource_name == "v1/pods"
    assert fast.container_count == 2
    assert fast.generate_name == "trainer-7d9f8c6b5-"
    assert [c.get("resources") for c in fast.container_resources()] == [
        None,
        {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000", "cpu": "1"}},
    ]
    assert next(iter(fast.container_resources())) == {}
    assert fast.view()["metadata"]["labels"] == {"hami.io/webhook": "ignore"}  # only those read


def test_what_is_not_a_pod_create_goes_to_the_full_parse() -> None:
    pod = replica_pod()
    assert decode_fast(_body(review(pod, operation="UPDATE", old=pod))) is None
    assert decode_fast(_body(review(pod, kind="Deployment", group="apps"))) is None
    sub = review(pod)
    sub["request"]["subResource"] = "status"
    assert decode_fast(_body(sub)) is None
    assert decode_fast(b"\xff" + _body(review(pod))) is None  # not UTF-8
    assert decode_fast(_body(review(pod)).replace(b'"team-a"', '"tëam"'.encode(), 1)) is not None
