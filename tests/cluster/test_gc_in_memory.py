"""Template garbage collection in process (issue 66's in-process tier): the collector and the
template store against the in-memory API (tests/support/memory_api.py), which keeps what the
collector leans on: label selectors, metadata-only pages, resourceVersion preconditions (409),
JSON patch tests (422). tests/cluster/test_gc.py keeps the same behaviour on the real
kube-apiserver with its own timestamps and the race at the real server."""

from __future__ import annotations

import time
from collections.abc import Coroutine
from typing import Any

from hami_dra_webhook.cluster.templates.gc import GcReport, collect_garbage
from hami_dra_webhook.cluster.templates.store import DELETING_ANNOTATION, ApiTemplateStore, Clocks
from hami_dra_webhook.kube.port import paths
from tests.support.api_calls import CallsThrough
from tests.support.loop import run
from tests.support.memory_api import MemoryApi
from tests.support.templates import templates

HOUR = 3600.0
TEAM = "team"


def _cluster(*namespaces: str) -> MemoryApi:
    api = MemoryApi()
    api.namespaces(TEAM, *namespaces)
    return api


def _make(api: MemoryApi, memory: str, at: float, namespace: str = TEAM) -> str:
    """A template as an admission at wall time `at` makes it."""
    store = ApiTemplateStore(api, clocks=Clocks(wall=lambda: at))  # type: ignore[arg-type]
    items = templates(memory, namespace)
    run(store.ensure(namespace, items, dry_run=False, deadline=time.monotonic() + 3))
    return str(items[0]["metadata"]["name"])


def _use(api: MemoryApi, template: str) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"uses-{template}"},
        "spec": {
            "containers": [{"name": "c", "image": "x"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
        },
    }
    api.put(paths.pods(TEAM), pod)


def _names(api: MemoryApi, namespace: str = TEAM) -> set[str]:
    return {t["metadata"]["name"] for t in api.objects(paths.templates(namespace))}


def _report(report: GcReport) -> dict[str, list[str]]:
    return {f: getattr(report, f) for f in ("deleted", "in_use", "recent", "raced", "foreign")}


def test_only_old_unreferenced_templates_of_the_webhook_go() -> None:
    api = _cluster("other")
    now = time.time()
    later = now + 2 * HOUR
    old_unused, old_used = _make(api, "1000", now), _make(api, "2000", now)
    _use(api, old_used)
    recent = _make(api, "3000", later - 600)
    foreign = templates("5000", "other")[0]
    foreign["metadata"].pop("labels")  # not the webhook's: no managed-by label
    api.put(paths.templates("other"), foreign)
    report = run(collect_garbage(api, now=later, grace=HOUR))  # type: ignore[arg-type]
    assert _report(report) == {
        "deleted": [f"{TEAM}/{old_unused}"],
        "in_use": [f"{TEAM}/{old_used}"],
        "recent": [f"{TEAM}/{recent}"],
        "raced": [],
        "foreign": [],
    }
    assert _names(api) == {old_used, recent}
    assert _names(api, "other") == {foreign["metadata"]["name"]}
    dry = run(collect_garbage(api, now=later + 2 * HOUR, grace=HOUR, dry_run="client"))  # type: ignore[arg-type]
    assert dry.deleted == [f"{TEAM}/{recent}"] and _names(api) == {old_used, recent}


def test_an_admission_between_the_read_and_the_delete_keeps_its_template() -> None:
    """The collector has read an old, unreferenced template; before its delete, an admission
    whose cache entry expired confirms the same template (409, then a last-used stamp): the
    delete's resourceVersion precondition fails, and the template stays, unmarked."""
    api = _cluster()
    now = time.time()
    later = now + 2 * HOUR
    name = _make(api, "1000", now)

    def admission_in_between() -> Coroutine[Any, Any, list[str]]:
        store = ApiTemplateStore(api, clocks=Clocks(wall=lambda: later))  # type: ignore[arg-type]
        return store.ensure(
            TEAM, templates("1000", TEAM), dry_run=False, deadline=time.monotonic() + 3
        )

    racing = CallsThrough(api)  # type: ignore[arg-type]
    racing.before["delete_template"] = admission_in_between
    report = run(collect_garbage(racing, now=later, grace=HOUR))  # type: ignore[arg-type]
    assert (report.raced, report.deleted) == ([f"{TEAM}/{name}"], [])
    assert _names(api) == {name}
    again = run(collect_garbage(api, now=later, grace=HOUR))  # type: ignore[arg-type]
    assert again.recent == [f"{TEAM}/{name}"]
    (kept,) = api.objects(paths.templates(TEAM))
    assert DELETING_ANNOTATION not in kept["metadata"].get("annotations", {})
