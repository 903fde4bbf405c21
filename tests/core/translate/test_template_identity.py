"""A stored template is recognised as the webhook's only when it is exactly what the webhook
writes under that name (finding 3 of the second hostile-callers issue: a template squatted under
a webhook name, or changed since, must never be trusted, stamped or garbage-collected)."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from hami_dra_webhook.core.translate.claims import (
    HASH_LENGTH,
    LEGACY_REQUEST_ANNOTATION,
    content_digest,
)
from hami_dra_webhook.core.translate.template_identity import (
    metadata_differs,
    not_written_by_webhook,
)

CASES = Path(__file__).parents[2] / "cases"


def _every_case_template() -> list[dict[str, Any]]:
    found = []
    for expected in sorted(CASES.glob("*/expected.yaml")):
        report = yaml.safe_load(expected.read_text())
        found += report.get("templates") or []
    return found


TEMPLATES = _every_case_template()


def test_the_rule_cases_make_templates() -> None:
    assert len(TEMPLATES) > 40


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t["metadata"]["name"])
def test_every_template_the_webhook_writes_is_recognised(template: dict[str, Any]) -> None:
    stored = copy.deepcopy(template)
    # What kube-apiserver adds on its own, and the webhook's stamp, change nothing.
    stored["metadata"] |= {"uid": "u", "resourceVersion": "7", "namespace": "team-a"}
    stored["metadata"]["annotations"]["hami.io/last-used"] = "2026-12-02T00:00:00Z"
    stored["metadata"]["annotations"]["hami.io/deleting"] = "gc"
    assert not_written_by_webhook(stored) is None
    assert metadata_differs(stored["metadata"], template) == ""


def _changed(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    stored = copy.deepcopy(TEMPLATES[0])
    target = stored
    for step in path[:-1]:
        target = target[step]
    if value is None:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return stored


@pytest.mark.parametrize(
    ("path", "value", "reason"),
    [
        (("metadata", "labels"), None, "labels are not exactly the webhook's"),
        (("metadata", "labels", "app.kubernetes.io/managed-by"), "me", "not exactly the webhook"),
        (("metadata", "labels", "hami.io/dra"), None, "labels are not exactly the webhook's"),
        # Issue 34, finding 5: a copy that only adds to the webhook's metadata is not its own.
        (("metadata", "labels", "team"), "a", "labels are not exactly the webhook's"),
        (("metadata", "annotations", "note"), "x", "annotations the webhook does not write"),
        (("metadata", "finalizers"), ["tenant.io/keep"], "finalizers or owner references"),
        (("metadata", "ownerReferences"), [{"uid": "u"}], "finalizers or owner references"),
        (("metadata", "annotations", LEGACY_REQUEST_ANNOTATION), None, "no hami.io/legacy"),
        (("metadata", "annotations", LEGACY_REQUEST_ANNOTATION), "nvidia.com/gpu=8", "content"),
        (("spec", "spec", "devices", "requests"), [], "content is not what its name"),
        (("spec", "spec", "devices", "requests", 0, "name"), "x", "content is not"),
        (("spec",), None, "no spec"),
        (("metadata", "name"), "hami-gpu-0000000000000000", "content is not"),
        (("metadata",), None, "no metadata"),
    ],
)
def test_a_template_that_differs_in_anything_is_not_the_webhooks(
    path: tuple[Any, ...], value: Any, reason: str
) -> None:
    found = not_written_by_webhook(_changed(path, value))
    assert found is not None and reason in found


def test_a_whole_gpu_squatted_under_a_shared_templates_name_is_not_the_webhooks() -> None:
    """The attack as played on kube-apiserver: the same name and labels, a whole GPU asked."""
    shared = next(t for t in TEMPLATES if "memory" in str(t["spec"]["spec"]["devices"]["requests"]))
    squatted = copy.deepcopy(shared)
    squatted["spec"]["spec"]["devices"]["requests"] = [
        {"name": "gpu", "exactly": {"deviceClassName": "hami-core-gpu.project-hami.io"}}
    ]
    assert not_written_by_webhook(squatted) == "its content is not what its name stands for"
    assert not_written_by_webhook("not a map") == "it has no metadata"


# Everything a template body may hold (strings and integers in objects and lists), and more:
# any text (escapes, control characters, non-ASCII, lone surrogates) and integers past 64 bits.
_BODIES = st.recursive(
    st.one_of(
        st.text(),
        st.text(alphabet='ab"\\\n\t\x00\x1f\x7f/\u00e9\u2028'),  # escapes and neighbours
        st.integers(min_value=-(2**70), max_value=2**70),
        st.booleans(),
        st.none(),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=24,
)


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(st.text(max_size=12), _BODIES, max_size=4))
def test_the_name_hash_is_of_jsons_sorted_text(body: dict[str, object]) -> None:
    """Names of templates already in clusters are the hash of json's sorted, compact text;
    the faster writer (orjson, where it writes the same text) must not change one."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    assert content_digest(body) == hashlib.sha256(text).hexdigest()[:HASH_LENGTH]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"labels": {"team": "a"}}, "its labels are not exactly the webhook's"),
        ({"annotations": {"note": "x"}}, "annotations the webhook does not write (note)"),
        ({"finalizers": ["tenant.io/keep"]}, "it has finalizers"),
        ({"ownerReferences": [{"uid": "u"}]}, "it has owner references"),
        ({"deletionTimestamp": "2026-12-03T00:00:00Z"}, "it is being deleted"),
    ],
)
def test_metadata_that_only_adds_to_the_webhooks_is_someone_elses(
    change: dict[str, Any], reason: str
) -> None:
    """Issue 34, finding 5: a tenant's copy with extra labels, a finalizer or an owner, or one
    being deleted, is not trusted as the webhook's (the admission path and the watch)."""
    template = TEMPLATES[0]
    metadata = copy.deepcopy(template["metadata"])
    for key, value in change.items():
        if isinstance(value, dict):
            metadata.setdefault(key, {}).update(value)
        else:
            metadata[key] = value
    assert reason in metadata_differs(metadata, template)
    assert metadata_differs(copy.deepcopy(template["metadata"]), template) == ""
