"""HAMi v2.10's per-card cordon (the node annotation `hami.io/device-cordon`: GPU UUIDs, comma
separated, that the scheduler gives no new task while running ones stay) as DRA's
DeviceTaintRules: one rule per card, tainting the driver's device of that UUID `NoSchedule`
(new claims are not allocated it; claims already allocated keep it), the same meaning.

`migrate node --to dra` writes the node's rules once the driver publishes its cards, and a move
back deletes them (legacy HAMi reads the annotation again); `migrate node --to dra` on a node
already in the DRA pool brings its rules in line with the annotation. Pure: what to create and
delete, from the node, the driver's slices and the rules there are."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from hami_dra_webhook.core.model.slice_view import SliceView
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.settings.policy import Policy

CORDON_ANNOTATION = "hami.io/device-cordon"
TAINT_KEY = "hami.io/device-cordon"
NODE_LABEL = "hami.io/device-cordon-node"  # the node's name, or its hash where it is no label
MANAGED_BY = {"app.kubernetes.io/managed-by": "hami-dra-webhook"}
RULE_API = "resource.k8s.io/v1"
MAX_CORDONED = 256  # a node has at most a few dozen cards; more is not a list of this node's
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


class CordonError(ValueError):
    """The annotation cannot be a list of this node's cards; the message says what to fix."""


def rules_served(discovery: JsonObject) -> bool:
    """Whether resource.k8s.io/v1's discovery lists DeviceTaintRules (Kubernetes 1.37+)."""
    return any(r.get("name") == "devicetaintrules" for r in discovery.get("resources") or [])


def cordoned_uuids(node: JsonObject) -> list[str]:
    """The node's cordoned UUIDs, read as HAMi v2.10 reads them (split on commas, trimmed,
    empty entries skipped), in order, without repeats."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    raw = annotations.get(CORDON_ANNOTATION) if isinstance(annotations, dict) else None
    if not isinstance(raw, str) or not raw.strip():
        return []
    uuids = list(dict.fromkeys(u.strip() for u in raw.split(",") if u.strip()))
    if len(uuids) > MAX_CORDONED:
        raise CordonError(
            f"annotation {CORDON_ANNOTATION} lists {len(uuids)} cards; a node has far fewer:"
            " list this node's cordoned GPU UUIDs"
        )
    return uuids


def node_label_value(node: str) -> str:
    """The node's name where it is a label value, else a hash of it (node names may be 253
    characters long)."""
    if _LABEL_VALUE.match(node):
        return node
    return "h-" + hashlib.sha256(node.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class CordonPlan:
    """What to do for one node: rules to create and names of rules to delete, and the UUIDs
    the driver does not publish on that node (said, not carried)."""

    create: list[JsonObject]
    replace: list[JsonObject]  # rules there whose device changed (deleted, then created)
    delete: list[str]
    unknown: list[str]
    cordoned: int

    @property
    def words(self) -> str:
        said = [f"{self.cordoned} cordoned card(s) as DeviceTaintRules"]
        if self.create or self.replace:
            said.append(f"{len(self.create) + len(self.replace)} written")
        if self.delete:
            said.append(f"{len(self.delete)} deleted")
        if self.unknown:
            unknown = ", ".join(self.unknown)
            said.append(f"not published by the driver on this node, so not carried: {unknown}")
        return ", ".join(said)


def rule_for(node: str, pool: str, device: str, uuid: str, policy: Policy) -> JsonObject:
    digest = hashlib.sha256(f"{node}/{pool}/{device}".encode()).hexdigest()[:16]
    return {
        "apiVersion": RULE_API,
        "kind": "DeviceTaintRule",
        "metadata": {
            "name": f"hami-device-cordon-{digest}",
            "labels": {**MANAGED_BY, NODE_LABEL: node_label_value(node)},
            "annotations": {CORDON_ANNOTATION: uuid, "hami.io/node": node},
        },
        "spec": {
            "deviceSelector": {
                "driver": policy.webhook.driver_name,
                "pool": pool,
                "device": device,
            },
            "taint": {"key": TAINT_KEY, "value": "true", "effect": "NoSchedule"},
        },
    }


def plan_cordons(
    node: str,
    uuids: list[str],
    slices: list[JsonObject],
    existing: list[JsonObject],
    policy: Policy,
) -> CordonPlan:
    """The rules the node's cordon asks for, against the rules it has (`existing`: those
    labelled with the node); `uuids` empty: every rule of the node goes."""
    published = _devices_by_uuid(node, slices, policy)
    wanted = {
        rule["metadata"]["name"]: rule
        for uuid in uuids
        if uuid in published
        for rule in [rule_for(node, *published[uuid], uuid, policy)]
    }
    have = {str((r.get("metadata") or {}).get("name")): r for r in existing}
    create = [rule for name, rule in wanted.items() if name not in have]
    replace = [
        rule
        for name, rule in wanted.items()
        if name in have and _meaning(have[name]) != _meaning(rule)
    ]
    delete = [name for name in have if name not in wanted]
    unknown = [u for u in uuids if u not in published]
    return CordonPlan(create, replace, delete, unknown, len(uuids))


def _meaning(rule: JsonObject) -> tuple[object, object]:
    """A rule's selector and taint, without what the server adds (the taint's timeAdded)."""
    spec = rule.get("spec") or {}
    taint = {k: v for k, v in (spec.get("taint") or {}).items() if k != "timeAdded"}
    return spec.get("deviceSelector"), taint


def _devices_by_uuid(
    node: str, slices: list[JsonObject], policy: Policy
) -> dict[str, tuple[str, str]]:
    """UUID -> (slice pool, device name) of the driver's devices on `node`."""
    web = policy.webhook
    found: dict[str, tuple[str, str]] = {}
    for view in map(SliceView.of, slices):
        if view.driver != web.driver_name or view.node_name != node:
            continue
        for device in view.devices:
            uuid = device.text(web.attributes.uuid)
            if uuid:
                found.setdefault(uuid, (view.pool, device.name))
    return found
