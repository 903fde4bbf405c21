"""Template garbage collection against the kube-apiserver stand-in, including the GC race."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from hami_dra_webhook.gc import collect_garbage
from hami_dra_webhook.kube import KubernetesApi
from hami_dra_webhook.templates import ApiTemplateStore, Clocks
from tests.apiserver_standin import StandIn
from tests.test_templates_store import templates

HOUR = 3600.0


def make(standin: StandIn, kube_api: KubernetesApi, memory: str, at: float) -> str:
    """Create a template as an admission at wall time `at` would."""
    standin.now = at
    store = ApiTemplateStore(kube_api, clocks=Clocks(wall=lambda: at))
    items = templates(memory)
    asyncio.run(store.ensure("team-a", items, dry_run=False, deadline=time.monotonic() + 3))
    return str(items[0]["metadata"]["name"])


def pod_using(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "p"},
        "spec": {"resourceClaims": [{"name": "c-gpu", "resourceClaimTemplateName": name}]},
    }


def test_gc_deletes_only_old_unreferenced_templates(
    standin: StandIn, kube_api: KubernetesApi
) -> None:
    now = time.time()
    old_unused = make(standin, kube_api, "1000", now - 2 * HOUR)
    old_used = make(standin, kube_api, "2000", now - 2 * HOUR)
    recent = make(standin, kube_api, "3000", now - 600)
    standin.pods["team-a"] = [pod_using(old_used)]
    standin.templates[("other", "not-ours")] = {
        "metadata": {"name": "not-ours", "namespace": "other", "resourceVersion": "1", "labels": {}}
    }
    report = asyncio.run(collect_garbage(kube_api, now=now, grace=HOUR))
    assert report.deleted == [f"team-a/{old_unused}"]
    assert report.in_use == [f"team-a/{old_used}"]
    assert report.recent == [f"team-a/{recent}"]
    assert set(standin.templates) == {
        ("team-a", old_used),
        ("team-a", recent),
        ("other", "not-ours"),
    }


def test_gc_dry_run_deletes_nothing(standin: StandIn, kube_api: KubernetesApi) -> None:
    now = time.time()
    name = make(standin, kube_api, "1000", now - 2 * HOUR)
    report = asyncio.run(collect_garbage(kube_api, now=now, grace=HOUR, dry_run=True))
    assert report.deleted == [f"team-a/{name}"]
    assert ("team-a", name) in standin.templates and standin.count("DELETE", "template") == 0


def test_an_admission_racing_the_gc_keeps_its_template(
    standin: StandIn, kube_api: KubernetesApi
) -> None:
    """GC has read an old, unreferenced template; before its delete, an admission whose cache
    entry expired confirms the same template (409, then a last-used stamp). The delete's
    resourceVersion precondition fails, so the pod being admitted keeps a template."""
    now = time.time()
    name = make(standin, kube_api, "1000", now - 2 * HOUR)
    admitted: list[str] = []

    def admission_in_between() -> None:
        store = ApiTemplateStore(kube_api)  # a cold cache, as after the TTL
        items = templates("1000")

        async def run() -> None:
            await store.ensure("team-a", items, dry_run=False, deadline=time.monotonic() + 3)

        import threading

        thread = threading.Thread(target=lambda: asyncio.run(run()))
        thread.start()
        thread.join()
        admitted.append(items[0]["metadata"]["name"])

    standin.before[("DELETE", "template")] = admission_in_between
    report = asyncio.run(collect_garbage(kube_api, now=now, grace=HOUR))
    assert admitted == [name]
    assert report.raced == [f"team-a/{name}"] and report.deleted == []
    assert ("team-a", name) in standin.templates
    # The next pass sees the fresh stamp and keeps it as recently used.
    assert asyncio.run(collect_garbage(kube_api, now=time.time(), grace=HOUR)).recent == [
        f"team-a/{name}"
    ]


def test_cached_templates_are_never_old_enough_to_collect(
    standin: StandIn, kube_api: KubernetesApi
) -> None:
    """A store serves a template from cache only within its TTL of the last stamp, and the
    settings refuse a TTL above a quarter of the grace period: such a template is 'recent'."""
    from hami_dra_webhook.server.settings import Settings

    ttl, grace = 300.0, HOUR
    Settings(cache_ttl=ttl, gc_grace=grace)  # accepted
    now = time.time()
    name = make(
        standin, kube_api, "1000", now - ttl
    )  # stamped one TTL ago: the oldest a cache hit can be
    report = asyncio.run(collect_garbage(kube_api, now=now, grace=grace))
    assert report.recent == [f"team-a/{name}"] and report.deleted == []


def test_settings_refuse_a_cache_ttl_close_to_the_grace_period() -> None:
    import pytest
    from pydantic import ValidationError

    from hami_dra_webhook.server.settings import Settings

    with pytest.raises(ValidationError, match="well below the GC grace period"):
        Settings(cache_ttl=1800, gc_grace=3600)
