"""ResourceClaimTemplates for one container's GPU share, content-addressed by their content."""

from __future__ import annotations

import functools
import hashlib
import json
import re

import orjson

from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.outcome.ask import DeviceAsk, ask_devices
from hami_dra_webhook.core.settings.policy import Policy

API_VERSION = "resource.k8s.io/v1"
KIND = "ResourceClaimTemplate"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "hami-dra-webhook"
DRA_LABEL = "hami.io/dra"
LEGACY_REQUEST_ANNOTATION = "hami.io/legacy-request"
# On a converted pod: what each GPU container asked for, with the names' domains left out (so
# that a search for a legacy resource name finds only what is still legacy), e.g.
# `server: gpu=1,gpumem=8000` (`; ` between containers).
CONVERTED_FROM_ANNOTATION = "hami.io/converted-from"
MAX_CONVERTED_FROM = 1024  # characters; the containers that do not fit are counted instead
HASH_LENGTH = 16
DNS_LABEL_MAX = 63
_NOT_DNS_LABEL = re.compile(r"[^a-z0-9-]+")


def template_labels() -> dict[str, str]:
    return {MANAGED_BY_LABEL: MANAGED_BY, DRA_LABEL: "true"}


def converted_from(entries: list[tuple[str, str]]) -> str:
    """The converted-from annotation of (container, legacy record) pairs, within
    MAX_CONVERTED_FROM characters."""
    text = ""
    for index, (container, record) in enumerate(entries):
        short = ",".join(pair.rpartition("/")[2] for pair in record.split(","))
        entry = f"{'; ' if text else ''}{container}: {short}"
        left = len(entries) - index
        more = f"; (+{left} more containers)"
        if len(text) + len(entry) > MAX_CONVERTED_FROM - (len(more) if left > 1 else 0):
            return text + (more if text else more[2:])
        text += entry
    return text


def ask_template(ask: DeviceAsk, record: str, policy: Policy, namespace: str | None) -> JsonObject:
    """The ResourceClaimTemplate of one container's device ask (any family), named by a hash of
    everything in it but its namespace. Its `spec` is shared between calls with the same
    content: treat it as read-only."""
    name, body = _content(ask, record, policy)
    metadata: JsonObject = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    metadata["labels"] = dict(body["metadata"]["labels"])
    metadata["annotations"] = dict(body["metadata"]["annotations"])
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": body["spec"]}


@functools.lru_cache(maxsize=512)  # as vendors.nvidia._device_ask: one entry a GPU shape
def _content(ask: DeviceAsk, record: str, policy: Policy) -> tuple[str, JsonObject]:
    body: JsonObject = {
        "metadata": {
            "labels": template_labels(),
            "annotations": {LEGACY_REQUEST_ANNOTATION: record},
        },
        "spec": {
            "metadata": {"labels": template_labels()},
            "spec": {"devices": ask_devices(ask, policy.webhook.consumable_capacity)},
        },
    }
    return policy.webhook.template_name_prefix + content_digest(body), body


def content_digest(body: JsonObject) -> str:
    """The hash a template's name ends in: of its labels, legacy-request annotation and spec.

    The hashed text is `json.dumps(body, sort_keys=True, separators=(",", ":"))`: names of
    templates already in clusters depend on it. orjson writes that same text, 15 times faster,
    when it is printable ASCII and escapes nothing but quotes and backslashes (json escapes
    every other character, orjson only control characters); otherwise json writes it. The
    body holds strings and integers only (a float's text could differ: DeviceAsk's fields are
    typed so)."""
    canonical = _plain_ascii_json(body)
    if canonical is None:
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(canonical).hexdigest()[:HASH_LENGTH]


def _plain_ascii_json(body: JsonObject) -> bytes | None:
    """orjson's sorted text of `body` where it is json's too, else None."""
    try:
        text = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:  # e.g. an integer beyond 64 bits
        return None
    if not text.isascii() or b"\x7f" in text:  # json escapes DEL too, orjson does not
        return None
    # Both write a quote as \" and a backslash as \\. Control characters they escape alike
    # today (the property test checks it), but orjson does not promise it: text with any other
    # escape is left to json. Pairs of backslashes first, left to right, as they are read.
    rest = text.replace(b"\\\\", b"").replace(b'\\"', b"")
    return text if b"\\" not in rest else None


def claim_name(container_name: object, taken: Taken) -> str:
    """A DNS label for the pod's resourceClaims entry, unique among `taken`, from the container."""
    base = _NOT_DNS_LABEL.sub("-", str(container_name).lower()).strip("-") or "container"
    base = f"{base[: DNS_LABEL_MAX - 4].rstrip('-')}-gpu"
    candidate, serial = base, taken.serials.get(base, 1)
    while candidate in taken:
        serial += 1
        suffix = f"-{serial}"
        candidate = base[: DNS_LABEL_MAX - len(suffix)].rstrip("-") + suffix
    taken.serials[base] = serial  # the next container of this base starts here: linear
    taken.add(candidate)
    return candidate


class Taken(set[str]):
    """Claim names in use, and per base name the serial reached, so that naming many
    containers whose names reduce to one base takes linear time, not quadratic."""

    def __init__(self, names: set[str] | None = None) -> None:
        super().__init__(names or ())
        self.serials: dict[str, int] = {}
