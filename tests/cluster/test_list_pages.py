"""Paged lists when a `continue` token expires mid-way (410 ResourceExpired).

A stand-in answers here, because the real kube-apiserver expires a token only once etcd has
compacted past it (minutes, and not on demand); the Status it answers with is the one the
Kubernetes API documents: 410, reason Expired, and a token in `metadata.continue` that goes on
with the rest of the list from a newer snapshot.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.aio.client import Configuration

from hami_dra_webhook.kube.client import KubernetesApi
from hami_dra_webhook.kube.port import ApiError
from tests.support.loop import run

EXPIRED = {
    "kind": "Status",
    "apiVersion": "v1",
    "status": "Failure",
    "reason": "Expired",
    "code": 410,
    "message": "The provided continue parameter is too old to display a consistent list result.",
}


class _Answers(KubernetesApi):
    """The adapter with its one HTTP call answered from a script (see the module docstring)."""

    def __init__(self, answers: list[Any]) -> None:
        super().__init__(Configuration(host="https://127.0.0.1:1"), page_size=2)
        self.answers = answers
        self.asked: list[list[tuple[str, str]]] = []

    async def _call(
        self, method: str, path: str, query: Any, body: Any, timeout: float, **_: Any
    ) -> Any:
        self.asked.append(query)
        answer = self.answers.pop(0)
        if isinstance(answer, ApiError):
            raise answer
        return answer


def _pods(*names: str, token: str = "") -> dict[str, Any]:
    return {
        "items": [{"metadata": {"name": name}} for name in names],
        "metadata": {"continue": token} if token else {},
    }


def _names(api: KubernetesApi) -> list[str]:
    async def read() -> list[str]:
        return [
            item["metadata"]["name"]
            async for page in api.pod_pages("ns", timeout=5)
            for item in page
        ]

    return run(read())


def test_an_expired_token_goes_on_with_the_token_the_server_gives() -> None:
    expired = ApiError.from_status(410, {**EXPIRED, "metadata": {"continue": "fresh"}})
    api = _Answers([_pods("a", "b", token="t1"), expired, _pods("c", "d")])
    assert _names(api) == ["a", "b", "c", "d"]
    assert [dict(q).get("continue") for q in api.asked] == [None, "t1", "fresh"]
    assert all(dict(q)["limit"] == "2" for q in api.asked)


def test_an_expired_token_without_one_to_go_on_with_is_an_error() -> None:
    api = _Answers([_pods("a", "b", token="t1"), ApiError.from_status(410, EXPIRED)])
    with pytest.raises(ApiError) as raised:
        _names(api)
    assert raised.value.status == 410 and "too old" in raised.value.message


def test_a_410_on_the_first_page_is_an_error() -> None:
    """No token was sent: a 410 there is not an expired continuation."""
    expired = ApiError.from_status(410, {**EXPIRED, "metadata": {"continue": "fresh"}})
    api = _Answers([expired])
    with pytest.raises(ApiError):
        _names(api)
