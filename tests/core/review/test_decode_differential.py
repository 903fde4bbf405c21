"""The fast review reader (`core.review.fast`) against the full parse: same answers, always.

For every body: where the fast reader accepts it, the full parse must accept it too, `pod_view`
of what the full parse reads must equal the fast reader's view, and the use case must answer
both the same (the answer sent to kube-apiserver, and what is logged and counted). Where the fast
reader declines, the webhook parses fully, which is today's path by construction. The bodies:
the benchmark's and every rule case's pods (which the fast reader must take: otherwise this
test would prove nothing), the fuzz test's generated reviews, and bodies mangled at the byte
level (truncation, invalid UTF-8 and lone surrogates at every depth, NaN, 1e400, 40-digit and
-0 numbers, duplicate keys, wrong types at each path the translation reads, deep nesting).
"""

from __future__ import annotations

import asyncio
import copy
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hami_dra_webhook.admission.admitted import AdmissionRules
from hami_dra_webhook.admission.mutator import MutationRecord, PodMutator
from hami_dra_webhook.cluster.templates.store import OfflineTemplateStore
from hami_dra_webhook.core.review.fast import decode_fast, read_review
from hami_dra_webhook.core.review.wire import MalformedReview, parse_review
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY, Policy
from hami_dra_webhook.core.translate.pod_view import pod_view
from tests.support.cases import CASE_NAMES, load_case
from tests.support.review_mix import mix
from tests.support.review_strategies import REVIEWS, json_values
from tests.support.reviews import replica_pod, review

EXAMPLES = 400


def _record(request: Any, policy: Policy, fast: Any = None) -> tuple[Any, ...]:
    mutator = PodMutator(rules=AdmissionRules(policy), store=OfflineTemplateStore())
    found: MutationRecord = asyncio.run(mutator.mutate(request, fast=fast))
    return (
        found.answer,
        found.operation,
        found.outcome,
        found.namespace,
        found.name,
        found.uid,
        found.user,
        found.resource,
        found.dry_run,
        found.templates,
        found.resources,
    )


def same_answer(body: bytes, policy: Policy = DEFAULT_POLICY) -> bool:
    """Check the two readers agree on `body`; whether the fast one took it."""
    fast = decode_fast(body)
    try:
        full = parse_review(body).request
    except MalformedReview as error:
        assert fast is None, f"the fast reader took a body the full parse refuses: {error}"
        with pytest.raises(MalformedReview, match=str(error)[:40].replace("(", r"\(")):
            read_review(body)
        return False
    if fast is None:
        return False
    request, pod = fast
    assert pod.view() == pod_view(full.object)
    assert _record(request, policy, pod) == _record(full, policy)
    return True


def _body(document: Any) -> bytes:
    return json.dumps(document).encode()


@pytest.mark.parametrize("name", sorted(mix()))
def test_the_benchmark_pods_are_read_fast_and_answered_the_same(name: str) -> None:
    assert same_answer(_body(mix()[name]))


def test_only_the_labels_read_are_in_the_fast_key() -> None:
    """Pods that differ in a label the translation does not read share a key (and an answer);
    the opt-out and the webhook's own label are read, so they change it."""

    def key(labels: dict[str, Any]) -> bytes:
        document = mix()["one-gpu"]
        document["request"]["object"]["metadata"]["labels"] = labels
        body = _body(document)
        assert same_answer(body)
        found = decode_fast(body)
        assert found is not None
        return found[1].key

    plain = key({"app": "trainer"})
    assert key({"app": "trainer", "apps.kubernetes.io/pod-index": "7"}) == plain
    assert key({}) == plain
    assert key({"app": "trainer", "hami.io/webhook": "ignore"}) != plain
    assert key({"hami.io/dra": "true"}) != plain


@pytest.mark.parametrize("name", CASE_NAMES)
def test_every_rule_case_is_answered_the_same(name: str) -> None:
    pod, policy = load_case(name)
    taken = same_answer(_body(review(pod, namespace="team-a")), policy)
    metadata = pod.get("metadata", {})
    odd = not isinstance(metadata, dict) or any(
        not isinstance(metadata.get(key, {}), dict | None) for key in ("labels", "annotations")
    )
    assert taken or odd, "a plain pod read fully"


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=REVIEWS)
def test_generated_reviews_are_answered_the_same(case: tuple[str, Any]) -> None:
    same_answer(_body(case[1]))


# Paths the translation reads, and some it skips, into a one-GPU pod's review.
READ_PATHS: list[tuple[Any, ...]] = [
    ("request", "uid"),
    ("request", "namespace"),
    ("request", "name"),
    ("request", "dryRun"),
    ("request", "kind"),
    ("request", "kind", "kind"),
    ("request", "operation"),
    ("request", "subResource"),
    ("request", "oldObject"),
    ("request", "userInfo"),
    ("request", "userInfo", "username"),
    ("request", "resource"),
    ("request", "object"),
    ("request", "object", "metadata"),
    ("request", "object", "metadata", "namespace"),
    ("request", "object", "metadata", "generateName"),
    ("request", "object", "metadata", "labels"),
    ("request", "object", "metadata", "labels", "app"),
    ("request", "object", "metadata", "annotations"),
    ("request", "object", "metadata", "annotations", "nvidia.com/use-gputype"),
    ("request", "object", "metadata", "annotations", "example.com/other"),
    ("request", "object", "spec"),
    ("request", "object", "spec", "nodeName"),
    ("request", "object", "spec", "schedulerName"),
    ("request", "object", "spec", "runtimeClassName"),
    ("request", "object", "spec", "resourceClaims"),
    ("request", "object", "spec", "containers"),
    ("request", "object", "spec", "initContainers"),
    ("request", "object", "spec", "containers", 0),
    ("request", "object", "spec", "containers", 0, "name"),
    ("request", "object", "spec", "containers", 0, "resources"),
    ("request", "object", "spec", "containers", 0, "resources", "limits"),
    ("request", "object", "spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"),
    ("request", "object", "spec", "containers", 0, "resources", "limits", "nvidia.com/gpumem"),
    ("request", "object", "spec", "containers", 0, "env"),
    ("request", "object", "spec", "containers", 0, "securityContext"),
    ("request", "object", "spec", "containers", 0, "securityContext", "privileged"),
    ("request", "object", "spec", "containers", 0, "image"),  # skipped
    ("request", "object", "spec", "tolerations"),  # skipped
    ("request", "object", "status"),  # skipped
    ("request", "options"),  # skipped
]
ODD_TEXT = [
    "NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1e309", "1.7976931348623159e308",
    "1e308", "-0", "-0.0", "1E2", "0.1e-400", "12345678901234567890123456789012345678901",
    "18446744073709551616", "-9223372036854775809", '"\\ud800"', '"\\udc00x"', '"\\u0000"',
    '"\\u0022"', '"\u202e"', '"\\ud83d\\ude00"', '"a\\/b"', "[]", "{}", "null", "true", '""',
    '"x" "y"', "tru", "01", "1.", "+1", '"\x01"', '"\t"', '["a",]', '{"a":1,}',
    "[" * 600 + "]" * 600, "[" * 1100 + "]" * 1100, '{"a":' * 1030 + "1" + "}" * 1030,
]  # fmt: skip


def _one_gpu() -> dict[str, Any]:
    pod = replica_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"})
    pod["metadata"]["labels"] = {"app": "trainer"}
    pod["metadata"]["annotations"] = {"nvidia.com/use-gputype": "A100", "example.com/other": "x"}
    pod["spec"]["containers"][0]["env"] = [{"name": "A", "value": "1"}]
    pod["spec"]["containers"][0]["securityContext"] = {"privileged": False}
    return review(pod)


def _with_text(document: dict[str, Any], path: tuple[Any, ...], text: str) -> bytes:
    """The document serialized with the JSON text `text` (valid or not) at `path`."""
    marker = "\u0001MARK\u0001"
    changed = copy.deepcopy(document)
    node = changed
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = marker
    return json.dumps(changed).replace(json.dumps(marker), text).encode()


@pytest.mark.parametrize("path", READ_PATHS, ids=lambda p: "/".join(map(str, p[1:])))
def test_odd_json_at_every_path_is_answered_the_same(path: tuple[Any, ...]) -> None:
    document = _one_gpu()
    for text in ODD_TEXT:
        same_answer(_with_text(document, path, text))
    for value in (None, 1, 1.5, True, "x", [], {}, [1], {"a": 1}):
        same_answer(_with_text(document, path, json.dumps(value)))


@pytest.mark.parametrize("path", READ_PATHS, ids=lambda p: "/".join(map(str, p[1:])))
def test_invalid_utf8_at_every_path_is_answered_the_same(path: tuple[Any, ...]) -> None:
    document = _one_gpu()
    for raw in (b'"\xff"', b'"\xc0\xaf"', b'"\xed\xa0\x80"', b'"a\xe2\x82"', b'["\xfe"]'):
        body = _with_text(document, path, "RAWHERE")
        same_answer(body.replace(b"RAWHERE", raw))


def test_duplicate_keys_are_answered_about_the_value_translated() -> None:
    """Both readers keep the last value, as Go's encoding/json does."""
    document = _one_gpu()
    body = json.dumps(document)
    limits = '"nvidia.com/gpumem": "3000"'
    for original, doubled in (
        ('"uid": ', '"uid": "first", "uid": '),
        ('"namespace": "team-a"', '"namespace": "other", "namespace": "team-a"'),
        ('"object": ', '"object": {"spec": {}}, "object": '),
        (limits, f'"nvidia.com/gpumem": "9000", {limits}'),
        (limits, f'{limits}, "nvidia.com/gpumem": "9000"'),
        ('"labels": ', '"labels": {"a": "b"}, "labels": '),
        ('"containers": ', '"containers": [], "containers": '),
        ('"kind": "Pod"', '"kind": "Service", "kind": "Pod"'),
        ('"operation": "CREATE"', '"operation": "CREATE", "operation": "DELETE"'),
    ):
        assert original in body
        changed = body.replace(original, doubled, 1).encode()
        assert same_answer(changed) or original.startswith('"operation"') or "Service" in doubled
    taken = decode_fast(body.replace(limits, f'"nvidia.com/gpumem": "9000", {limits}').encode())
    assert taken is not None and "3000" in json.dumps(taken[1].view())


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_mangled_bodies_are_answered_the_same(data: st.DataObject) -> None:
    body = _body(_one_gpu())
    how = data.draw(st.sampled_from(["truncate", "insert", "replace", "json"]))
    at = data.draw(st.integers(0, len(body)))
    if how == "truncate":
        mangled = body[:at]
    elif how == "insert":
        piece = data.draw(
            st.sampled_from([b"\xff", b"\\ud800", b"e400", b"1e400", b",", b"}", b"]", b'"', b" "])
        )
        mangled = body[:at] + piece + body[at:]
    elif how == "replace":
        mangled = body[:at] + bytes([data.draw(st.integers(0, 255))]) + body[at + 1 :]
    else:
        path = data.draw(st.sampled_from(READ_PATHS))
        mangled = _with_text(_one_gpu(), path, json.dumps(data.draw(json_values)))
    same_answer(mangled)


def test_deep_nesting_is_refused_alike_whatever_the_recursion_limit() -> None:
    """msgspec's depth follows the interpreter's recursion limit; orjson's is 1,024 levels.
    Raised here (hypothesis raises it too), the fast reader must still not take a body the full
    parse refuses as nested too deeply, in a field it skips or one it reads."""
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(20_000)
    try:
        for path in (("request", "userInfo"), ("request", "object", "metadata", "labels")):
            for depth in (1000, 1023, 1024, 1025, 3000):
                text = '{"a":' * depth + "1" + "}" * depth
                same_answer(_with_text(_one_gpu(), path, text))
    finally:
        sys.setrecursionlimit(previous)


def test_deep_nesting_is_refused_alike_at_the_usual_recursion_limit() -> None:
    """At the interpreter's usual limit msgspec refuses from ~1,000 levels, so a body of more
    than 1,000 openings is read fast (`_msgspec_refuses_deeper`); one nesting deeper than
    orjson's 1,024 must still be refused alike, in a field skipped or read, with thousands of
    containers beside it. (celpy raises the limit to 2,500 when it builds an environment: the
    limit is set here, as the server's is.)"""
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        many = _one_gpu()
        many["request"]["object"]["spec"]["containers"] *= 1500  # 4,500+ openings
        for path in (("request", "userInfo"), ("request", "object", "metadata", "labels")):
            for depth in (990, 1000, 1023, 1024, 1025, 3000):
                text = '{"a":' * depth + "1" + "}" * depth
                same_answer(_with_text(many, path, text))
        assert same_answer(_body(many))  # read fast: many openings, none deep
    finally:
        sys.setrecursionlimit(previous)


def _large_pod_review(count: int, limits: dict[str, str]) -> Any:
    pod = replica_pod()
    pod["spec"]["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "1"}}}]
    pod["spec"]["containers"] = [
        {"name": f"c{index}", "image": "cuda", "resources": {"limits": limits}}
        for index in range(count)
    ]
    return review(pod)


@pytest.mark.parametrize(
    ("count", "limits", "outcome"),
    [
        (3000, {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}, "converted"),
        (10_000, {"cpu": "1"}, "unchanged"),
        (10_001, {"cpu": "1"}, "unchanged"),
        (10_001, {"nvidia.com/gpu": "1"}, "refused"),
        (40_000, {"hygon.com/dcunum": "1"}, "refused"),
    ],
)
def test_pods_of_thousands_of_containers_are_read_fast_and_answered_the_same(
    count: int, limits: dict[str, str], outcome: str
) -> None:
    """Issue 23 finding 7: a review of 40,000 containers was parsed whole (more than 1,000
    openings), holding the interpreter for the decode and keeping the memory of its objects.
    Read fast now, translated off the loop as the server does (over 256 containers), and one
    of more than 10,000 containers decided from its containers' resources alone: the same
    answers as the full parse."""
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)  # as the server's (see above)
    try:
        body = _body(_large_pod_review(count, limits))
        fast = decode_fast(body)
    finally:
        sys.setrecursionlimit(previous)
    assert fast is not None
    request, pod = fast
    full = parse_review(body).request
    with ThreadPoolExecutor(max_workers=1) as executor:

        def record(request: Any, pod: Any = None) -> MutationRecord:
            mutator = PodMutator(
                rules=AdmissionRules(DEFAULT_POLICY),
                store=OfflineTemplateStore(),
                off_loop=executor,
            )
            assert mutator.needs_off_loop(request, pod)
            return asyncio.run(mutator.mutate(request, off_loop=True, fast=pod))

        got, expected = record(request, pod), record(full)
    assert got == expected and got.outcome == outcome, (got.outcome, got.answer)
