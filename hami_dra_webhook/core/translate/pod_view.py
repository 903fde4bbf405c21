"""The part of a pod the translation reads, and nothing else.

`translate_pod(pod_view(pod))` decides exactly as `translate_pod(pod)` (a property test checks
it over generated pods), and its patch applies to the whole pod: container positions and every
map the patch adds to or removes from are kept. So the view, serialized, is an exact cache key:
pods with the same view get the same decision, and pods that differ in anything the translation
reads have different views. Pods of one ReplicaSet have the same view.
"""

from __future__ import annotations

from typing import Any

from hami_dra_webhook.core.legacy.annotations import VENDOR_ANNOTATIONS, is_ascend_uuid_key
from hami_dra_webhook.core.legacy.selectors import SELECTOR_ANNOTATIONS
from hami_dra_webhook.core.model.containers import CONTAINER_LISTS
from hami_dra_webhook.core.translate.claims import DRA_LABEL

_READ_ANNOTATIONS = frozenset((*SELECTOR_ANNOTATIONS, *VENDOR_ANNOTATIONS))
# The labels the translation reads: the opt-out (pod_checks.left_alone) and its own mark
# (pod_patch.pod_ops: added unless already "true"). Any other label (a StatefulSet's pod name,
# an indexed Job's completion index, an operator's replica index) changes nothing, so pods that
# differ only in those share a view.
OPT_OUT_LABEL = "hami.io/webhook"
READ_LABELS = frozenset((OPT_OUT_LABEL, DRA_LABEL))


def reads_annotation(key: str) -> bool:
    """Whether the translation reads the annotation `key` (the others are left out of views)."""
    return key in _READ_ANNOTATIONS or is_ascend_uuid_key(key)


SPEC_FIELDS = ("nodeName", "schedulerName", "runtimeClassName", "resourceClaims", "resources")
CONTAINER_FIELDS = ("name", "resources", "env", "securityContext")


def pod_view(pod: Any) -> Any:
    """The pod reduced to what the translation reads; anything not a map stays as it is (the
    translation refuses or ignores it the same way)."""
    if not isinstance(pod, dict):
        return pod
    view: dict[str, Any] = {}
    if "metadata" in pod:
        view["metadata"] = _metadata(pod["metadata"])
    if "spec" in pod:
        view["spec"] = _spec(pod["spec"])
    return view


def _metadata(metadata: Any) -> Any:
    if not isinstance(metadata, dict):
        return metadata
    view: dict[str, Any] = {}
    if "labels" in metadata:
        labels = metadata["labels"]
        view["labels"] = (
            {key: value for key, value in labels.items() if key in READ_LABELS}
            if isinstance(labels, dict)
            else labels
        )
    if "annotations" in metadata:
        annotations = metadata["annotations"]
        view["annotations"] = (
            {key: value for key, value in annotations.items() if reads_annotation(key)}
            if isinstance(annotations, dict)
            else annotations
        )
    return view


def _spec(spec: Any) -> Any:
    if not isinstance(spec, dict):
        return spec
    view = {key: spec[key] for key in SPEC_FIELDS if key in spec}
    for list_name in CONTAINER_LISTS:
        if list_name in spec:
            items = spec[list_name]
            view[list_name] = [_container(c) for c in items] if isinstance(items, list) else items
    return view


def _container(container: Any) -> Any:
    if not isinstance(container, dict):
        return container
    return {key: container[key] for key in CONTAINER_FIELDS if key in container}
