"""Findings 3 and 4 of the second hostile-callers issue, on the real kube-apiserver.

3. Template squatting: template names are content-addressed, so the same in every namespace; a
   namespace editor (a ServiceAccount bound to the `edit` ClusterRole there) pre-created one
   under the name the webhook computes, asking for a whole GPU, and the webhook stamped it and
   pointed the next legacy pods at it. Now only an object that is exactly what the webhook
   writes is used, stamped, kept in the cache or garbage-collected; otherwise the pod is refused
   with what is wrong, and the object is left as it is.
4. A template deleted between its confirmation and the admission's answer (the pod is admitted
   referencing it) is created again by the watch, at once.
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
from typing import Any

import pytest

from hami_dra_webhook.cluster.templates.gc import collect_garbage
from hami_dra_webhook.cluster.templates.store import (
    LAST_USED_ANNOTATION,
    ApiTemplateStore,
    TemplateUnavailable,
)
from hami_dra_webhook.kube.client import KubernetesApi
from tests.support.api_calls import CallsThrough
from tests.support.cluster import Cluster
from tests.support.loop import run
from tests.support.templates import ensure, templates

pytestmark = pytest.mark.plane  # the shared control plane (tests/conftest.py)

WHOLE_GPU = [{"name": "gpu", "exactly": {"deviceClassName": "hami-core-gpu.project-hami.io"}}]


def _editor(kube: Cluster, namespace: str) -> Any:
    """kubectl as a ServiceAccount with the `edit` ClusterRole in `namespace` only."""
    kube.kubectl("create", "serviceaccount", "tenant", "-n", namespace)
    kube.kubectl(
        "create",
        "rolebinding",
        "tenant-edit",
        "--clusterrole=edit",
        f"--serviceaccount={namespace}:tenant",
        "-n",
        namespace,
    )
    kubeconfig = kube.service_account_kubeconfig(namespace, "tenant")

    def kubectl(*args: str, stdin: str | None = None) -> Any:
        return kube.kubectl(*args, stdin=stdin, kubeconfig=kubeconfig)

    return kubectl


def _squat(
    kube: Cluster, namespace: str, template: dict[str, Any], labelled: bool
) -> dict[str, Any]:
    """The tenant's object under the webhook's name: a whole GPU, no capacity, no selectors;
    with the webhook's labels and annotation copied (labelled) or none."""
    squatted = copy.deepcopy(template)
    squatted["metadata"]["namespace"] = namespace
    if not labelled:
        del squatted["metadata"]["labels"], squatted["metadata"]["annotations"]
    squatted["spec"]["spec"]["devices"] = {"requests": WHOLE_GPU}
    kubectl = _editor(kube, namespace)
    kubectl("apply", "-f", "-", stdin=json.dumps(squatted))
    return dict(kube.get("resourceclaimtemplate", template["metadata"]["name"], "-n", namespace))


@pytest.mark.parametrize("labelled", [False, True], ids=["bare", "webhook-labels-copied"])
def test_a_squatted_template_refuses_the_pod_and_is_left_as_it_is(
    kube: Cluster, real_api: KubernetesApi, labelled: bool
) -> None:
    namespace = kube.create_namespace("squat")
    [template] = templates("1000", namespace)
    name = template["metadata"]["name"]
    before = _squat(kube, namespace, template, labelled)
    with pytest.raises(TemplateUnavailable) as raised:
        ensure(ApiTemplateStore(real_api), [template], namespace=namespace)
    message = raised.value.message
    assert raised.value.code == 409
    assert f"ResourceClaimTemplate {namespace}/{name} exists but is not the one" in message
    wrong = "its spec asks for something else than nvidia.com/gpu=1,nvidia.com/gpumem=1000"
    assert wrong in message
    assert ("labels are not exactly the webhook's" in message) is not labelled
    assert f"kubectl -n {namespace} delete resourceclaimtemplate {name}" in message
    after = kube.get("resourceclaimtemplate", name, "-n", namespace)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert LAST_USED_ANNOTATION not in (after["metadata"].get("annotations") or {})
    if labelled:
        # Listed by the garbage collector's selector, unused and old: still never deleted.
        report = run(collect_garbage(real_api, now=time.time() + 7200, grace=3600))
        assert f"{namespace}/{name}" in report.foreign
        assert f"{namespace}/{name}" not in report.deleted
        assert kube.get("resourceclaimtemplate", name, "-n", namespace)["spec"] == after["spec"]
    # Deleted by whoever may, the next pod gets the webhook's own.
    kube.kubectl("delete", "resourceclaimtemplate", name, "-n", namespace)
    ensure(ApiTemplateStore(real_api), [template], namespace=namespace)
    assert kube.get("resourceclaimtemplate", name, "-n", namespace)["spec"] == template["spec"]


def test_a_cached_template_changed_by_someone_else_is_no_longer_used(
    kube: Cluster, real_api: KubernetesApi
) -> None:
    """The watch drops a cached template whose labels or annotation change (its spec cannot:
    kube-apiserver keeps a template's spec immutable), and the next pod is refused."""
    namespace = kube.create_namespace("changed")
    [template] = templates("1100", namespace)
    name = template["metadata"]["name"]
    store = ApiTemplateStore(real_api, cache_ttl=300)

    async def scenario() -> tuple[int, TemplateUnavailable | None]:
        watching = asyncio.create_task(store.watch.run())
        try:
            while not store.watching:
                await asyncio.sleep(0.02)
            await store.ensure(namespace, [template], dry_run=False, deadline=time.monotonic() + 5)
            cached = len(store)
            kube.kubectl(
                "annotate",
                "--overwrite",
                "resourceclaimtemplate",
                name,
                "-n",
                namespace,
                "hami.io/legacy-request=nvidia.com/gpu=1",
            )
            deadline = time.monotonic() + 10
            while len(store) and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            try:
                await store.ensure(
                    namespace, [template], dry_run=False, deadline=time.monotonic() + 5
                )
            except TemplateUnavailable as error:
                return cached - len(store), error
            return cached - len(store), None
        finally:
            watching.cancel()
            await asyncio.gather(watching, return_exceptions=True)

    dropped, refused = run(scenario())
    assert dropped == 1
    assert refused is not None and refused.code == 409, refused
    assert "its hami.io/legacy-request annotation is not nvidia.com/gpu=1" in refused.message


def test_a_template_deleted_between_confirmation_and_answer_comes_back(
    kube: Cluster, real_api: KubernetesApi
) -> None:
    """Finding 4: the admission confirms (creates) the template, someone deletes it before the
    answer, and the pod is admitted referencing a template that does not exist. The watch sees
    a cached template deleted, so it creates it again: the pod's claim can be made."""
    namespace = kube.create_namespace("gone")
    [template] = templates("1200", namespace)
    name = template["metadata"]["name"]
    api = CallsThrough(real_api)
    store = ApiTemplateStore(api, cache_ttl=300)
    api.after["create_template"] = lambda: kube.kubectl(
        "delete", "resourceclaimtemplate", name, "-n", namespace
    )

    def present() -> bool:
        found = kube.kubectl("get", "resourceclaimtemplate", name, "-n", namespace, check=False)
        return found.returncode == 0

    async def scenario() -> tuple[bool, float]:
        watching = asyncio.create_task(store.watch.run())
        try:
            while not store.watching:
                await asyncio.sleep(0.02)
            await store.ensure(namespace, [template], dry_run=False, deadline=time.monotonic() + 5)
            answered = time.monotonic()
            missing_at_answer = not present()
            while not present() and time.monotonic() - answered < 10:
                await asyncio.sleep(0.05)
            return missing_at_answer, time.monotonic() - answered
        finally:
            watching.cancel()
            await asyncio.gather(watching, return_exceptions=True)

    missing_at_answer, back_after = run(scenario())
    assert missing_at_answer, "the delete did not happen between confirmation and answer"
    assert back_after < 5 and present()
    stored = kube.get("resourceclaimtemplate", name, "-n", namespace)
    assert stored["spec"] == template["spec"]
    assert api.calls["create_template"] == 2  # the admission's, then the watch's
