"""Second hostile-callers issue, finding 8, through the real webhook server: JSON duplicate
keys, odd numbers in quantities, and annotation values with quotes, newlines, NUL, lone
surrogates and right-to-left marks that end up in CEL.

Duplicate keys: the body is decoded once, by orjson, whose last value wins; the envelope, the
answer's uid and the translation all read that one decoded document, so the webhook never
translates a value other than the one it answers about. kube-apiserver itself (sigs.k8s.io/json)
also keeps the last value of a pod's duplicate key (tests/e2e/test_admission.py shows it), and it
serializes the object it sends, so duplicates reach the webhook only from direct callers.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.cel_k8s import hami_device, selects
from tests.support.reviews import replica_pod, review
from tests.support.webhook_in_process import InProcessWebhook
from tests.support.webhook_process import Webhook


@pytest.fixture(scope="module")
def webhook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Webhook]:
    """The whole server in this process (real TLS, real sockets): what is tested is its answers."""
    served = InProcessWebhook(tmp_path_factory.mktemp("odd"), "--gc-interval", "0")
    yield served
    assert served.stop() == 0


def _post_text(webhook: Webhook, text: str) -> tuple[int, Any]:
    return webhook.post(text.encode())


def _review_text(pod_text: str, uid: str = '"u1"') -> str:
    return (
        '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{'
        f'"uid":{uid},"kind":{{"group":"","version":"v1","kind":"Pod"}},'
        '"resource":{"group":"","version":"v1","resource":"pods"},'
        '"namespace":"team-a","operation":"CREATE",'
        f'"object":{pod_text}}}}}'
    )


def _pod_text(limits: str) -> str:
    return (
        '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":'
        f'[{{"name":"c","image":"i","resources":{{"limits":{limits}}}}}]}}}}'
    )


def _patch(answer: dict[str, Any]) -> list[dict[str, Any]]:
    return list(json.loads(base64.b64decode(answer["response"]["patch"])))


def test_duplicate_keys_the_last_value_is_read_and_answered_about(webhook: Webhook) -> None:
    limits = '{"nvidia.com/gpu":"1","nvidia.com/gpumem":"1000","nvidia.com/gpumem":"2000"}'
    body = _review_text(_pod_text(limits), uid='"first","uid":"second"')
    status, answer = _post_text(webhook, body)
    assert status == 200 and answer["response"]["uid"] == "second"
    warnings = " ".join(answer["response"]["warnings"])
    assert "2000 MiB" in warnings and "1000 MiB" not in warnings
    # Two objects: the second one (no GPU) is the one answered about.
    plain = '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[]}}'
    gpu = _pod_text('{"nvidia.com/gpu":"1"}')
    twice = _review_text(plain).replace('"object":', f'"object":{gpu},"object":', 1)
    status, answer = _post_text(webhook, twice)
    assert status == 200 and answer["response"] == {"uid": "u1", "allowed": True}
    # Two namespaces: the last one is where the pod is (an excluded one: nothing done).
    excluded = _review_text(_pod_text('{"nvidia.com/gpu":"1"}')).replace(
        '"namespace":"team-a"', '"namespace":"team-a","namespace":"kube-system"'
    )
    status, answer = _post_text(webhook, excluded)
    assert status == 200 and "patch" not in answer["response"]
    assert "namespace kube-system is excluded" in " ".join(answer["response"]["warnings"])


@pytest.mark.parametrize("zero", ['"-0"', "-0", '"0"'])
def test_minus_zero_is_zero(webhook: Webhook, zero: str) -> None:
    """kube-apiserver stores the quantity -0 as 0; so does the webhook: the legacy meaning of
    gpumem 0 (the default memory), the same answer as for "0"."""
    body = _review_text(_pod_text(f'{{"nvidia.com/gpu":"1","nvidia.com/gpumem":{zero}}}'))
    status, answer = _post_text(webhook, body)
    reference = _review_text(_pod_text('{"nvidia.com/gpu":"1","nvidia.com/gpumem":"0"}'))
    assert status == 200 and answer == _post_text(webhook, reference)[1]


@pytest.mark.parametrize(
    ("value", "code", "fragment"),
    [
        ('"1e308"', 422, "nvidia.com/gpumem"),
        ("1e308", 422, "nvidia.com/gpumem"),
        ('"1234567890123456789012345678901234567890"', 422, "nvidia.com/gpumem"),
        ("1234567890123456789012345678901234567890", 422, "nvidia.com/gpumem"),
        ("Infinity", 400, "not JSON"),
        ("NaN", 400, "not JSON"),
    ],
)
def test_odd_numbers_in_quantities_are_refused_with_a_reason(
    webhook: Webhook, value: str, code: int, fragment: str
) -> None:
    body = _review_text(_pod_text(f'{{"nvidia.com/gpu":"1","nvidia.com/gpumem":{value}}}'))
    status, answer = _post_text(webhook, body)
    if code == 400:
        assert status == 400 and fragment in answer["message"], answer
        return
    response = answer["response"]
    assert status == 200 and response["allowed"] is False, response
    assert response["status"]["code"] == code and fragment in response["status"]["message"]


ODD_TYPES = [
    'A100"] || true || ["',  # a quote: \u0022 once decoded
    "A100\n|| true",
    "A100\x00H100",
    "A100\u200fH100",  # a right-to-left mark
    "A100\u202eH100",  # a right-to-left override
]


@pytest.mark.parametrize("value", ODD_TYPES, ids=["quote", "newline", "nul", "rlm", "rlo"])
def test_odd_annotation_values_stay_one_cel_literal(webhook: Webhook, value: str) -> None:
    """The value reaches CEL as one string literal: the selector compiles, and it matches a
    device whose product name contains exactly that text, not one named A100 or H100."""
    pod = replica_pod()
    pod["metadata"]["annotations"] = {"nvidia.com/use-gputype": value}
    status, answer = webhook.post(review(pod))
    assert status == 200 and answer["response"]["allowed"] is True, answer
    [template] = [
        op["value"]
        for op in _patch(answer)
        if op["path"] == "/spec/resourceClaims" or op["path"].startswith("/spec/resourceClaims")
    ]
    assert template  # the claim; the selector is in the template the webhook made offline
    warnings = " ".join(answer["response"]["warnings"])
    assert "offline webhook: ResourceClaimTemplate" in warnings


def test_odd_annotation_values_compile_to_one_literal() -> None:
    """What the test above cannot see offline (templates are not returned): the selectors the
    core makes for these values, evaluated by CEL."""
    from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
    from hami_dra_webhook.core.translate.pod import translate_pod

    for value in ODD_TYPES:
        pod = replica_pod()
        pod["metadata"]["annotations"] = {"nvidia.com/use-gputype": value}
        [template] = translate_pod(pod, DEFAULT_POLICY, "team-a").templates
        request = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
        expressions = [selector["cel"]["expression"] for selector in request["selectors"]]
        named = hami_device(0, f"NVIDIA-{value.upper()}", 80 << 30)
        assert selects(expressions, named), value
        for plain in ("NVIDIA-A100", "NVIDIA-H100", "A100-SXM4-80GB"):
            assert not selects(expressions, hami_device(1, plain, 80 << 30)), (value, plain)


def test_a_lone_surrogate_is_refused(webhook: Webhook) -> None:
    """JSON that escapes half a UTF-16 pair is no text a CEL literal (or kube-apiserver) can
    hold: a 400 that says the body is not JSON."""
    pod_text = json.dumps(replica_pod()).replace(
        '"labels"', '"annotations":{"nvidia.com/use-gputype":"A100\\ud800"},"labels"', 1
    )
    status, answer = _post_text(webhook, _review_text(pod_text))
    assert status == 400 and "not JSON" in answer["message"], answer


def test_the_body_is_decoded_once(webhook: Webhook) -> None:
    """A reading of the same body by Python's own decoder agrees on what orjson read."""
    body = _review_text(_pod_text('{"nvidia.com/gpu":"1","nvidia.com/gpu":"2"}'))
    assert json.loads(body)["request"]["object"]["spec"]["containers"][0]["resources"] == {
        "limits": {"nvidia.com/gpu": "2"}
    }
    status, answer = _post_text(webhook, body)
    assert status == 200
    assert "2 GPUs" in " ".join(answer["response"]["warnings"]) or any(
        op["path"] == "/spec/resourceClaims" for op in _patch(answer)
    )


@pytest.mark.parametrize("name", [{"a": 1}, ["x"], 5])
def test_an_env_name_of_another_type_is_a_400_with_its_path(webhook: Webhook, name: Any) -> None:
    """Finding 5, through the real process: a CREATE whose GPU container has an env entry
    named by a map (or a list, or a number) was a 500 and a traceback in the log."""
    pod = replica_pod({"nvidia.com/gpu": "1", "nvidia.com/priority": "1"})
    pod["spec"]["containers"][0]["env"] = [{"name": name, "value": "v"}]
    status, answer = webhook.post(review(pod))
    response = answer["response"]
    assert status == 200 and response["allowed"] is False
    assert response["status"] == {
        "code": 400,
        "message": 'container "cuda": env[0].name is not a string',
        "reason": "BadRequest",
    }
    assert "Traceback" not in webhook.log()
