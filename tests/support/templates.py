"""ResourceClaimTemplates as the webhook makes them, and the template store driven from a test,
for the tests of the store, GC, squatting and the serve shell."""

from __future__ import annotations

import time
from typing import Any

from hami_dra_webhook.cluster.template_store import ApiTemplateStore
from hami_dra_webhook.core.policy import DEFAULT_POLICY
from hami_dra_webhook.core.translate import translate_pod
from tests.support.cluster import Cluster
from tests.support.loop import run


def templates(memory: str | int = "4000", namespace: str = "team-a") -> list[dict[str, Any]]:
    pod = {
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "resources": {
                        "limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(memory)}
                    },
                }
            ]
        }
    }
    return translate_pod(pod, DEFAULT_POLICY, namespace).templates


def ensure(
    store: ApiTemplateStore,
    items: list[dict[str, Any]],
    dry_run: bool = False,
    budget: float = 3.0,
    namespace: str = "team-a",
) -> list[str]:
    return run(store.ensure(namespace, items, dry_run=dry_run, deadline=time.monotonic() + budget))


def stored(kube: Cluster, namespace: str) -> list[dict[str, Any]]:
    return list(kube.get("resourceclaimtemplates", "-n", namespace)["items"])
