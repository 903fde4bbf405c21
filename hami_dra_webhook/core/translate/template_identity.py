"""Whether a stored ResourceClaimTemplate is exactly one this webhook writes, and the JSON patch
that stamps the one that was read and found so (finding 3 of the second hostile-callers issue: a
namespace editor could create a template under a webhook name, and every later legacy pod was
pointed at it).

Two ways to tell, for two situations:
- with the template at hand (an admission, the watch of cached ones): compare its metadata with
  what the webhook writes (`metadata_differs`: exactly the webhook's labels, no annotation but
  the legacy request and the webhook's own stamps, no finalizer, no owner, not being deleted)
  and the spec kube-apiserver stores for it (`what_differs`); the stamp then holds only for the
  version read (`stamp_if_unchanged`). The watch sees metadata only: a template's spec is
  immutable, so an object with the uid that was confirmed has the spec that was confirmed. (A
  JSON patch `test` of the spec itself cannot be used: kube-apiserver compares raw JSON, and its
  encoding of `&&` in a CEL selector, `\u0026\u0026`, never equals ours.)
- with only the stored object (the garbage collector): its name ends in a hash of its labels,
  annotation and spec (`not_written_by_webhook`).
"""

from __future__ import annotations

from hami_dra_webhook.core.model import patch
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.translate.claims import (
    LEGACY_REQUEST_ANNOTATION,
    content_digest,
    template_labels,
)

LAST_USED_ANNOTATION = "hami.io/last-used"
DELETING_ANNOTATION = "hami.io/deleting"  # written by the garbage collector just before it deletes
# The annotations a template of the webhook's may carry: its legacy request and its own stamps.
OWN_ANNOTATIONS = frozenset({LEGACY_REQUEST_ANNOTATION, LAST_USED_ANNOTATION, DELETING_ANNOTATION})


def _record(template: JsonObject) -> str:
    return str(template["metadata"]["annotations"][LEGACY_REQUEST_ANNOTATION])


def stamp_if_unchanged(
    resource_version: str, stamp: dict[str, str], drop: tuple[str, ...] = ()
) -> list[JsonObject]:
    """A JSON patch that writes `stamp` and removes the `drop` annotations (which the version
    read has) only on the version that was read."""
    test: JsonObject = {
        "op": "test",
        "path": "/metadata/resourceVersion",
        "value": resource_version,
    }
    writes: list[JsonObject] = [
        {"op": "add", "path": patch.pointer("metadata", "annotations", key), "value": value}
        for key, value in stamp.items()
    ]
    removals: list[JsonObject] = [
        {"op": "remove", "path": patch.pointer("metadata", "annotations", key)} for key in drop
    ]
    return [test, *writes, *removals]


def _map(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def metadata_differs(metadata: object, template: JsonObject) -> str:
    """What in a stored template's metadata is not what the webhook writes for `template`
    (empty: nothing): other labels, annotations but its own, finalizers, owners, a deletion
    under way. A copy that only adds to the webhook's metadata is someone else's too."""
    found = _map(metadata)
    wrong = []
    labels = _map(found.get("labels"))
    if labels != template_labels():
        wrong.append("its labels are not exactly the webhook's")
    annotations = _map(found.get("annotations"))
    record = _record(template)
    if annotations.get(LEGACY_REQUEST_ANNOTATION) != record:
        wrong.append(f"its {LEGACY_REQUEST_ANNOTATION} annotation is not {record}")
    others = sorted(key for key in annotations if key not in OWN_ANNOTATIONS)
    if others:
        wrong.append(f"it has annotations the webhook does not write ({', '.join(others[:3])})")
    if found.get("finalizers"):
        wrong.append("it has finalizers")
    if found.get("ownerReferences"):
        wrong.append("it has owner references")
    if found.get("deletionTimestamp"):
        wrong.append("it is being deleted")
    return "; ".join(wrong)


def what_differs(stored: JsonObject, template: JsonObject, stored_spec: JsonObject) -> str:
    """What makes `stored` another object than the webhook's `template` (empty: nothing),
    `stored_spec` being the spec kube-apiserver stores for that template."""
    wrong = [metadata_differs(stored.get("metadata"), template)]
    if stored.get("spec") != stored_spec:
        wrong.append(f"its spec asks for something else than {_record(template)}")
    return "; ".join(w for w in wrong if w)


def foreign_metadata(metadata: JsonObject) -> str | None:
    """Why metadata alone cannot be a template of the webhook's, whatever its legacy request
    (None: it can be): other labels, annotations but its own, finalizers or owners. The
    garbage collector judges listed metadata by it before reading any spec."""
    if _map(metadata.get("labels")) != template_labels():
        return "its labels are not exactly the webhook's"
    if any(key not in OWN_ANNOTATIONS for key in _map(metadata.get("annotations"))):
        return "it has annotations the webhook does not write"
    if metadata.get("finalizers") or metadata.get("ownerReferences"):
        return "it has finalizers or owner references"
    return None


def not_written_by_webhook(stored: object) -> str | None:
    """Why a stored template is not exactly one this webhook writes (None: it is).

    Its name ends in a hash of its labels, its legacy-request annotation and its spec, and
    kube-apiserver stores the spec as written where consumable capacity is kept (quantities are
    written in their canonical form), so a template someone else made under a webhook name, or
    changed since, shows. (Where kube-apiserver drops capacity, the webhook's own templates do not
    verify either, and are kept: the safe side.)"""
    if not isinstance(stored, dict) or not isinstance(stored.get("metadata"), dict):
        return "it has no metadata"
    metadata = stored["metadata"]
    wrong = foreign_metadata(metadata)
    if wrong is not None:
        return wrong
    annotations = metadata.get("annotations")
    record = annotations.get(LEGACY_REQUEST_ANNOTATION) if isinstance(annotations, dict) else None
    if not isinstance(record, str):
        return f"it has no {LEGACY_REQUEST_ANNOTATION} annotation"
    spec = stored.get("spec")
    name = metadata.get("name")
    if not isinstance(spec, dict) or not isinstance(name, str):
        return "it has no spec or no name"
    body = {
        "metadata": {
            "labels": template_labels(),
            "annotations": {LEGACY_REQUEST_ANNOTATION: record},
        },
        "spec": spec,
    }
    if not name.endswith(content_digest(body)):
        return "its content is not what its name stands for"
    return None
