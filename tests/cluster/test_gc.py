"""Template garbage collection against the real kube-apiserver, including the GC race.

Time is moved by running a pass "later" (`now` in the future) rather than by faking the
server's timestamps: templates made now are old to a pass two hours ahead.
"""

from __future__ import annotations

import time
from collections.abc import Coroutine
from typing import Any

import pytest
from pydantic import ValidationError

from hami_dra_webhook.cluster.templates.gc import GcReport, collect_garbage
from hami_dra_webhook.cluster.templates.store import DELETING_ANNOTATION, ApiTemplateStore, Clocks
from hami_dra_webhook.kube.client import KubernetesApi
from hami_dra_webhook.server.settings import Settings
from tests.support.api_calls import CallsThrough
from tests.support.cluster import Cluster, api_for
from tests.support.loop import run
from tests.support.templates import templates

HOUR = 3600.0


def make(api: KubernetesApi, namespace: str, memory: str, at: float) -> str:
    """Create a template as an admission at wall time `at` would."""
    store = ApiTemplateStore(api, clocks=Clocks(wall=lambda: at))
    items = templates(memory, namespace)
    run(store.ensure(namespace, items, dry_run=False, deadline=time.monotonic() + 3))
    return str(items[0]["metadata"]["name"])


def use(kube: Cluster, namespace: str, template: str, name: str = "") -> None:
    """A pod that references the template (no kubelet runs it: it only has to exist)."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name or f"uses-{template}"},
        "spec": {
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
            "resourceClaims": [{"name": "c-gpu", "resourceClaimTemplateName": template}],
        },
    }
    kube.apply(pod, namespace=namespace)


def names(kube: Cluster, namespace: str) -> set[str]:
    items = kube.get("resourceclaimtemplates", "-n", namespace)["items"]
    return {t["metadata"]["name"] for t in items}


def only(report: GcReport, namespace: str) -> dict[str, list[str]]:
    """The report's entries in one namespace (the cluster is shared with other tests)."""
    return {
        field: [e for e in getattr(report, field) if e.startswith(f"{namespace}/")]
        for field in ("deleted", "in_use", "recent", "raced")
    }


@pytest.mark.plane
def test_gc_deletes_only_old_unreferenced_templates(kube: Cluster, real_api: KubernetesApi) -> None:
    namespace = kube.create_namespace("gc")
    other = kube.create_namespace("gc-other")
    now = time.time()
    old_unused = make(real_api, namespace, "1000", now)
    old_used = make(real_api, namespace, "2000", now)
    use(kube, namespace, old_used)
    later = now + 2 * HOUR
    recent = make(real_api, namespace, "3000", later - 600)
    foreign = templates("5000", other)[0]
    foreign["metadata"].pop("labels")  # not ours: no managed-by label
    kube.apply(foreign, namespace=other)
    report = run(collect_garbage(real_api, now=later, grace=HOUR))
    assert only(report, namespace) == {
        "deleted": [f"{namespace}/{old_unused}"],
        "in_use": [f"{namespace}/{old_used}"],
        "recent": [f"{namespace}/{recent}"],
        "raced": [],
    }
    assert names(kube, namespace) == {old_used, recent}
    assert names(kube, other) == {foreign["metadata"]["name"]}


@pytest.mark.plane
def test_gc_dry_run_deletes_nothing(kube: Cluster, real_api: KubernetesApi) -> None:
    namespace = kube.create_namespace("gc")
    name = make(real_api, namespace, "1000", time.time())
    api = CallsThrough(real_api)
    report = run(collect_garbage(api, now=time.time() + 2 * HOUR, grace=HOUR, dry_run="client"))
    assert only(report, namespace)["deleted"] == [f"{namespace}/{name}"]
    assert names(kube, namespace) == {name}
    assert "delete_template" not in api.calls


@pytest.mark.plane
def test_an_admission_racing_the_gc_keeps_its_template(
    kube: Cluster, real_api: KubernetesApi
) -> None:
    """GC has read an old, unreferenced template; before its delete, an admission whose cache
    entry expired confirms the same template (409, then a last-used stamp). The real
    kube-apiserver fails the delete on its resourceVersion precondition, so the pod being
    admitted keeps a template."""
    namespace = kube.create_namespace("gc")
    now = time.time()
    later = now + 2 * HOUR
    name = make(real_api, namespace, "1000", now)

    def admission_in_between() -> Coroutine[Any, Any, list[str]]:
        store = ApiTemplateStore(real_api, clocks=Clocks(wall=lambda: later))  # a cold cache
        items = templates("1000", namespace)
        return store.ensure(namespace, items, dry_run=False, deadline=time.monotonic() + 3)

    api = CallsThrough(real_api)
    api.before["delete_template"] = admission_in_between
    report = run(collect_garbage(api, now=later, grace=HOUR))
    assert only(report, namespace)["raced"] == [f"{namespace}/{name}"]
    assert only(report, namespace)["deleted"] == []
    assert names(kube, namespace) == {name}
    # The next pass sees the fresh stamp and keeps it as recently used; the admission took the
    # garbage collector's mark off (a later delete by someone else is re-created again).
    again = run(collect_garbage(real_api, now=later, grace=HOUR))
    assert only(again, namespace)["recent"] == [f"{namespace}/{name}"]
    kept = kube.get("resourceclaimtemplate", name, "-n", namespace)
    assert DELETING_ANNOTATION not in kept["metadata"]["annotations"]


@pytest.mark.plane
def test_cached_templates_are_never_old_enough_to_collect(
    kube: Cluster, real_api: KubernetesApi
) -> None:
    """A store serves a template from cache only within its TTL of the last stamp, and the
    settings refuse a TTL above a quarter of the grace period: such a template is 'recent'."""
    ttl, grace = 300.0, HOUR
    Settings(cache_ttl=ttl, gc_grace=grace)  # accepted
    namespace = kube.create_namespace("gc")
    later = time.time() + 2 * HOUR
    name = make(real_api, namespace, "1000", later - ttl)  # the oldest a cache hit can be
    report = run(collect_garbage(real_api, now=later, grace=grace))
    assert only(report, namespace)["recent"] == [f"{namespace}/{name}"]
    assert names(kube, namespace) == {name}


def test_settings_refuse_a_cache_ttl_close_to_the_grace_period() -> None:
    with pytest.raises(ValidationError, match="well below the GC grace period"):
        Settings(cache_ttl=1800, gc_grace=3600)


@pytest.mark.plane
def test_gc_reads_pods_a_page_at_a_time(kube: Cluster) -> None:
    """A template referenced only by a pod on the last page of the namespace's pods (2 a page)
    is in use; the unreferenced one is collected."""
    namespace = kube.create_namespace("gc-pages")
    api = api_for(kube.plane.admin_kubeconfig, page_size=2)
    try:
        now = time.time()
        unused = make(api, namespace, "1000", now)
        used = make(api, namespace, "2000", now)
        plain = {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {"name": f"a-{i}"},
                        "spec": plain,
                    }
                    for i in range(5)
                ],
            },
            namespace=namespace,
        )
        use(kube, namespace, used, name="z-last")  # listed in name order: the last page
        report = run(collect_garbage(api, now=now + 2 * HOUR, grace=HOUR, dry_run="client"))
    finally:
        run(api.close())
    assert only(report, namespace) == {
        "deleted": [f"{namespace}/{unused}"],
        "in_use": [f"{namespace}/{used}"],
        "recent": [],
        "raced": [],
    }
