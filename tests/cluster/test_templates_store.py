"""Templates through the API adapter and the store: against the real kube-apiserver, and
against the stand-in only for faults a real server does not produce on demand (500, 429,
reset connections, a hanging answer)."""

from __future__ import annotations

import asyncio
import copy
import time

import pytest

from hami_dra_webhook.cluster.templates.store import (
    LAST_USED_ANNOTATION,
    ApiTemplateStore,
    Clocks,
    TemplateUnavailable,
)
from hami_dra_webhook.kube.client import KubernetesApi
from hami_dra_webhook.kube.port import KubeApi
from tests.support.api_calls import CallsThrough
from tests.support.apiserver_standin import StandIn
from tests.support.cluster import Cluster, api_for
from tests.support.loop import run
from tests.support.templates import ensure, stored, templates, watching


@pytest.mark.plane
def test_created_once_then_cached(kube: Cluster, real_api: KubernetesApi) -> None:
    namespace = kube.create_namespace("store")
    api = CallsThrough(real_api)
    store = ApiTemplateStore(api)
    with watching(store):
        ensure(store, templates(), namespace=namespace)
        ensure(store, templates(), namespace=namespace)
    assert api.calls == {"create_template": 1}
    [template] = stored(kube, namespace)
    assert template["metadata"]["name"].startswith("hami-gpu-")
    assert LAST_USED_ANNOTATION in template["metadata"]["annotations"]
    assert template["spec"] == templates()[0]["spec"]


@pytest.mark.plane
def test_existing_template_is_stamped_not_failed(kube: Cluster, real_api: KubernetesApi) -> None:
    namespace = kube.create_namespace("store")
    ensure(ApiTemplateStore(real_api), templates(), namespace=namespace)
    [first] = stored(kube, namespace)
    api = CallsThrough(real_api)
    # A replica with a cold cache, a few seconds later (a stamp within the same second changes
    # nothing, and kube-apiserver then keeps the resourceVersion: see gc.py).
    later = ApiTemplateStore(api, clocks=Clocks(wall=lambda: time.time() + 5))
    ensure(later, templates(), namespace=namespace)
    # 409, a read, a dry run under a generated name (what the server stores for this template),
    # then a stamp that holds only for the version read.
    assert api.calls == {"create_template": 2, "get_template": 1, "patch_template": 1}
    [second] = stored(kube, namespace)
    assert second["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"]
    assert (
        second["metadata"]["annotations"][LAST_USED_ANNOTATION]
        > (first["metadata"]["annotations"][LAST_USED_ANNOTATION])
    )


@pytest.mark.plane
def test_concurrent_identical_admissions_create_exactly_once(
    kube: Cluster, real_api: KubernetesApi
) -> None:
    namespace = kube.create_namespace("store")
    api = CallsThrough(real_api)
    store = ApiTemplateStore(api)

    async def many() -> None:
        deadline = time.monotonic() + 3
        await asyncio.gather(
            *(
                store.ensure(namespace, templates(), dry_run=False, deadline=deadline)
                for _ in range(50)
            )
        )

    run(many())
    assert api.calls == {"create_template": 1}
    assert len(stored(kube, namespace)) == 1


@pytest.mark.plane
def test_dry_run_creates_nothing(kube: Cluster, real_api: KubernetesApi) -> None:
    namespace = kube.create_namespace("store")
    api = CallsThrough(real_api)
    store = ApiTemplateStore(api)
    ensure(store, templates(), dry_run=True, namespace=namespace)
    ensure(store, templates(), dry_run=True, namespace=namespace)
    assert stored(kube, namespace) == []
    assert api.calls == {"create_template": 2}  # validated server-side each time, never cached


@pytest.mark.plane
def test_forbidden_says_check_its_rbac(kube: Cluster) -> None:
    namespace = kube.create_namespace("store")
    kube.kubectl("create", "serviceaccount", "powerless", "-n", namespace)
    api = api_for(kube.service_account_kubeconfig(namespace, "powerless"))
    try:
        with pytest.raises(TemplateUnavailable) as raised:
            ensure(ApiTemplateStore(api), templates(), namespace=namespace)
    finally:
        run(api.close())
    assert raised.value.code == 500
    assert "check its RBAC" in raised.value.message and "403 Forbidden" in raised.value.message


@pytest.mark.plane
def test_an_invalid_template_is_refused_with_the_servers_reason(
    kube: Cluster, real_api: KubernetesApi
) -> None:
    namespace = kube.create_namespace("store")
    broken = copy.deepcopy(templates())
    broken[0]["spec"]["spec"]["devices"]["requests"][0]["exactly"]["allocationMode"] = "Some"
    with pytest.raises(TemplateUnavailable) as raised:
        ensure(ApiTemplateStore(real_api), broken, namespace=namespace)
    assert raised.value.code == 422
    assert "rejected" in raised.value.message and "allocationMode" in raised.value.message


@pytest.mark.plane
def test_deleted_between_conflict_and_stamp_is_created_again(
    kube: Cluster, real_api: KubernetesApi
) -> None:
    namespace = kube.create_namespace("store")
    ensure(ApiTemplateStore(real_api), templates(), namespace=namespace)
    name = templates()[0]["metadata"]["name"]
    api = CallsThrough(real_api)
    # Another replica's GC deletes it right after our 409: the stamp gets 404, we create again.
    api.before["patch_template"] = lambda: kube.kubectl(
        "delete", "resourceclaimtemplate", name, "-n", namespace
    )
    ensure(ApiTemplateStore(api), templates(), namespace=namespace)
    assert api.calls == {"create_template": 3, "get_template": 1, "patch_template": 1}
    assert [t["metadata"]["name"] for t in stored(kube, namespace)] == [name]


# -- faults the real server does not produce on demand: the stand-in ----------------------------


@pytest.mark.parametrize(("status", "code"), [(500, 503), (429, 503)])
def test_server_errors_refuse_with_what_failed(
    standin: StandIn, standin_api: KubeApi, status: int, code: int
) -> None:
    standin.fail[("POST", "templates")] = status
    with pytest.raises(TemplateUnavailable) as raised:
        ensure(ApiTemplateStore(standin_api), templates())
    assert raised.value.code == code
    assert "failed to create" in raised.value.message
    assert "team-a/hami-gpu-" in raised.value.message


def test_unreachable_and_reset_connections_refuse(standin: StandIn, standin_api: KubeApi) -> None:
    standin.reset.add(("POST", "templates"))
    with pytest.raises(TemplateUnavailable) as raised:
        ensure(ApiTemplateStore(standin_api), templates())
    assert raised.value.code == 503 and "did not answer" in raised.value.message
    standin.stop()
    with pytest.raises(TemplateUnavailable):
        ensure(ApiTemplateStore(standin_api), templates())


def test_a_hanging_api_ends_within_the_budget(standin: StandIn, standin_api: KubeApi) -> None:
    standin.delay[("POST", "templates")] = 3.0
    started = time.monotonic()
    with pytest.raises(TemplateUnavailable):
        ensure(ApiTemplateStore(standin_api), templates(), budget=0.5)
    assert time.monotonic() - started < 1.5
