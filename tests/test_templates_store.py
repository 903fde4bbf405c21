"""Templates through the API adapter and the store, against the kube-apiserver stand-in."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from hami_dra_webhook.core.policy import DEFAULT_POLICY
from hami_dra_webhook.core.translate import translate_pod
from hami_dra_webhook.kube import KubernetesApi
from hami_dra_webhook.templates import LAST_USED_ANNOTATION, ApiTemplateStore, TemplateUnavailable
from tests.apiserver_standin import StandIn


def templates(memory: str = "4000") -> list[dict[str, Any]]:
    pod = {
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": memory}},
                }
            ]
        }
    }
    return translate_pod(pod, DEFAULT_POLICY, "team-a").templates


def ensure(
    store: ApiTemplateStore, items: list[dict[str, Any]], dry_run: bool = False, budget: float = 3.0
) -> list[str]:
    return asyncio.run(
        store.ensure("team-a", items, dry_run=dry_run, deadline=time.monotonic() + budget)
    )


def test_created_once_then_cached(standin: StandIn, kube_api: KubernetesApi) -> None:
    store = ApiTemplateStore(kube_api)
    ensure(store, templates())
    ensure(store, templates())
    assert standin.count("POST", "templates") == 1
    (((namespace, name), stored),) = standin.templates.items()
    assert namespace == "team-a" and name.startswith("hami-gpu-")
    assert LAST_USED_ANNOTATION in stored["metadata"]["annotations"]
    assert stored["spec"] == templates()[0]["spec"]


def test_existing_template_is_stamped_not_failed(standin: StandIn, kube_api: KubernetesApi) -> None:
    ensure(ApiTemplateStore(kube_api), templates())
    version = next(iter(standin.templates.values()))["metadata"]["resourceVersion"]
    ensure(
        ApiTemplateStore(kube_api), templates()
    )  # another replica, cold cache: 409, then a stamp
    assert standin.count("POST", "templates") == 2 and standin.count("PATCH", "template") == 1
    assert next(iter(standin.templates.values()))["metadata"]["resourceVersion"] != version


def test_concurrent_identical_admissions_create_exactly_once(
    standin: StandIn, kube_api: KubernetesApi
) -> None:
    store = ApiTemplateStore(kube_api)
    standin.delay[("POST", "templates")] = 0.2

    async def many() -> None:
        deadline = time.monotonic() + 3
        await asyncio.gather(
            *(
                store.ensure("team-a", templates(), dry_run=False, deadline=deadline)
                for _ in range(50)
            )
        )

    asyncio.run(many())
    assert standin.count("POST", "templates") == 1
    assert standin.count("PATCH", "template") == 0


def test_dry_run_creates_nothing(standin: StandIn, kube_api: KubernetesApi) -> None:
    store = ApiTemplateStore(kube_api)
    ensure(store, templates(), dry_run=True)
    ensure(store, templates(), dry_run=True)
    assert standin.templates == {}
    assert standin.count("POST", "templates") == 2  # validated server-side each time, never cached


@pytest.mark.parametrize(
    ("status", "code", "fragment"),
    [
        (403, 500, "check its RBAC"),
        (500, 503, "failed to create"),
        (429, 503, "failed to create"),
        (422, 422, "rejected"),
    ],
)
def test_api_failures_refuse_with_what_failed(
    standin: StandIn, kube_api: KubernetesApi, status: int, code: int, fragment: str
) -> None:
    standin.fail[("POST", "templates")] = status
    with pytest.raises(TemplateUnavailable) as raised:
        ensure(ApiTemplateStore(kube_api), templates())
    assert raised.value.code == code
    assert fragment in raised.value.message and "team-a/hami-gpu-" in raised.value.message


def test_unreachable_and_reset_connections_refuse(
    standin: StandIn, kube_api: KubernetesApi
) -> None:
    standin.reset.add(("POST", "templates"))
    with pytest.raises(TemplateUnavailable) as raised:
        ensure(ApiTemplateStore(kube_api), templates())
    assert raised.value.code == 503 and "did not answer" in raised.value.message
    standin.stop()
    with pytest.raises(TemplateUnavailable):
        ensure(ApiTemplateStore(kube_api), templates())


def test_a_hanging_api_ends_within_the_budget(standin: StandIn, kube_api: KubernetesApi) -> None:
    standin.delay[("POST", "templates")] = 3.0
    started = time.monotonic()
    with pytest.raises(TemplateUnavailable):
        ensure(ApiTemplateStore(kube_api), templates(), budget=0.5)
    assert time.monotonic() - started < 1.5


def test_deleted_between_conflict_and_stamp_is_created_again(
    standin: StandIn, kube_api: KubernetesApi
) -> None:
    ensure(ApiTemplateStore(kube_api), templates())
    # Another replica's GC deletes it right after our 409: the stamp gets 404, we create again.
    standin.before[("PATCH", "template")] = standin.templates.clear
    ensure(ApiTemplateStore(kube_api), templates())
    assert standin.count("POST", "templates") == 3
    assert standin.count("PATCH", "template") == 1
    assert len(standin.templates) == 1
