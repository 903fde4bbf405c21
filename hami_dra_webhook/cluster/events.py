"""Events the webhook and its tools write about the objects they act on (a held pod, a node
being moved, a pod evicted for a move): one body, written best effort (an Event is a courtesy;
what it reports happens all the same)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from hami_dra_webhook.core.model import kube_time
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.kube.port import ApiError, KubeApi, paths

log = logging.getLogger("hami_dra_webhook.events")
NODE_EVENTS_NAMESPACE = "default"  # where the kubelet writes a Node's (kubectl describe node)


@dataclass(frozen=True, slots=True)
class About:
    """The object an Event is about."""

    kind: str  # "Pod", "Node"
    name: str
    uid: str = ""
    namespace: str = ""  # "" for a cluster-scoped object

    @property
    def events_namespace(self) -> str:
        return self.namespace or NODE_EVENTS_NAMESPACE


def event_body(
    about: About,
    reason: str,
    message: str,
    kind: Literal["Normal", "Warning"] = "Normal",
    component: str = "hami-dra-webhook",
) -> JsonObject:
    now = kube_time.stamp()
    involved: JsonObject = {"apiVersion": "v1", "kind": about.kind, "name": about.name}
    if about.uid:
        involved["uid"] = about.uid
    if about.namespace:
        involved["namespace"] = about.namespace
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{about.name[:200]}.", "namespace": about.events_namespace},
        "involvedObject": involved,
        "reason": reason,
        "message": message[:1024],
        "type": kind,
        "source": {"component": component},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


async def post_event(api: KubeApi, body: JsonObject, timeout: float) -> bool:
    """Write the Event; whether it was written (a refusal, 403 where the caller may not write
    Events, is logged and not raised)."""
    namespace = str(body["metadata"]["namespace"])
    try:
        await api.create_object(paths.events(namespace), body, timeout=timeout)
    except ApiError as error:
        log.warning(
            "no Event %s for %s %s: %s",
            body.get("reason"),
            body["involvedObject"].get("kind"),
            body["involvedObject"].get("name"),
            error,
        )
        return False
    return True
