"""Issue 11, findings 7, 8 and 10 in the core: what a pod's annotations and containers may
make the webhook keep in memory or write to the cluster is bounded, and what is over a bound
is refused with a message before anything is written."""

from __future__ import annotations

import tracemalloc
from typing import Any

from hami_dra_webhook.core.legacy.selectors import (
    MAX_ANNOTATION_VALUE,
    NUMA_BIND,
    USE_TYPE,
    USE_UUID,
    device_filter,
)
from hami_dra_webhook.core.outcome.decision import Converted, Refusal
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from hami_dra_webhook.core.translate.pod import translate_pod
from hami_dra_webhook.core.translate.pod_checks import (
    MAX_CONTAINERS_PER_POD,
    MAX_TEMPLATE_BYTES_PER_POD,
    MAX_TEMPLATES_PER_POD,
)


def _pod(annotations: dict[str, str], containers: int = 1) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "annotations": annotations},
        "spec": {
            "containers": [
                {
                    "name": f"c{i}",
                    "resources": {
                        "limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(1000 + i)}
                    },
                }
                for i in range(containers)
            ]
        },
    }


def _growth(calls: int, annotations_of: Any) -> int:
    """Bytes still held after `calls` filters of distinct annotations (their garbage gone)."""
    device_filter({}, DEFAULT_POLICY)
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for index in range(calls):
        device_filter(annotations_of(index), DEFAULT_POLICY)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    return sum(stat.size_diff for stat in after.compare_to(before, "filename"))


def test_values_of_annotations_dra_cannot_honour_are_not_kept() -> None:
    """Finding 7: 100 pods with 2.9 MB numa-bind values took RSS from 77 to 360 MiB."""
    held = _growth(100, lambda i: {NUMA_BIND: f"{i}" + "x" * 1_000_000})
    assert held < 256 * 1024, held


def test_long_distinct_type_lists_are_not_cached() -> None:
    """Finding 8: distinct type/UUID annotations of valid size grew the caches to ~636 MiB."""
    held = _growth(2000, lambda i: {USE_TYPE: f"A{i}," + "B" * (MAX_ANNOTATION_VALUE - 10)})
    assert held < 1024 * 1024, held


def test_distinct_gpu_shapes_keep_little() -> None:
    """Every pod a gpumem of its own (a caller, or a cluster of many shapes): what the
    translation keeps of its asks and template contents is bounded. (With room for 4,096
    shapes, 12,000 of them kept 18.6 MiB.)"""
    translate_pod(_pod({}), DEFAULT_POLICY, "ns")
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for index in range(3000):
        pod = _pod({})
        pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem"] = str(2000 + index)
        translate_pod(pod, DEFAULT_POLICY, "ns")
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    held = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    assert held < 4 * 1024 * 1024, held


def test_an_annotation_over_the_bound_is_refused_with_its_size() -> None:
    decision = translate_pod(_pod({USE_UUID: "G" * (MAX_ANNOTATION_VALUE + 1)}), DEFAULT_POLICY)
    assert isinstance(decision, Refusal) and decision.reason == "annotation-too-long"
    assert f"{MAX_ANNOTATION_VALUE + 1} characters" in decision.message
    at_bound = translate_pod(_pod({USE_UUID: "G" * MAX_ANNOTATION_VALUE}), DEFAULT_POLICY)
    assert isinstance(at_bound, Converted)


def test_templates_per_pod_are_bounded_in_number() -> None:
    """Finding 10: each GPU container got its own template, with no limit per pod."""
    most = translate_pod(_pod({}, MAX_TEMPLATES_PER_POD), DEFAULT_POLICY)
    assert isinstance(most, Converted) and len(most.templates) == MAX_TEMPLATES_PER_POD
    over = translate_pod(_pod({}, MAX_TEMPLATES_PER_POD + 1), DEFAULT_POLICY)
    assert isinstance(over, Refusal) and over.reason == "too-many-templates"


def test_templates_per_pod_are_bounded_in_bytes() -> None:
    """Finding 10: a 36 KB review wrote 55.7 MB of templates (each repeats the selectors)."""
    uuids = ",".join(f"GPU-{i:08d}-aaaa-bbbb-cccc-dddddddddddd" for i in range(99))
    types = ",".join(f"T{i:03d}" for i in range(700))
    annotations = {
        USE_UUID: uuids,
        "nvidia.com/nouse-gpuuuid": uuids,
        USE_TYPE: types,
        "nvidia.com/nouse-gputype": types,
    }
    decision = translate_pod(_pod(annotations, MAX_TEMPLATES_PER_POD), DEFAULT_POLICY)
    assert isinstance(decision, Refusal) and decision.reason == "templates-too-large"
    assert decision.code == 422
    size = decision.message.split(" would take ")[1].split(" bytes")[0]
    assert decision.message == (
        f"the pod's ResourceClaimTemplates would take {size} bytes; at most"
        f" {MAX_TEMPLATE_BYTES_PER_POD} are written for one pod: list fewer GPU UUIDs or"
        " types in its annotations"
    )
    assert int(size) > MAX_TEMPLATE_BYTES_PER_POD
    # The same pod with as many containers as fit in the bytes is converted.
    fitting = int(MAX_TEMPLATE_BYTES_PER_POD / (int(size) / MAX_TEMPLATES_PER_POD))
    assert isinstance(translate_pod(_pod(annotations, fitting), DEFAULT_POLICY), Converted)
    fewer = translate_pod(_pod(annotations, 2), DEFAULT_POLICY)
    assert isinstance(fewer, Converted)


def test_exactly_what_is_short_is_cached() -> None:
    from hami_dra_webhook.core.legacy import selectors

    selectors._device_filter.cache_clear()

    def cached_after(annotations: dict[str, str]) -> int:
        device_filter(annotations, DEFAULT_POLICY)
        return selectors._device_filter.cache_info().currsize

    # 1,024 characters in all: cached (and found again).
    assert cached_after({USE_UUID: "a" * 512, USE_TYPE: "b" * 512}) == 1
    before = selectors._device_filter.cache_info().hits
    assert cached_after({USE_UUID: "a" * 512, USE_TYPE: "b" * 512}) == 1
    assert selectors._device_filter.cache_info().hits == before + 1
    # One more, or two values short alone but long together: not cached.
    assert cached_after({USE_UUID: "a" * 512, USE_TYPE: "b" * 513}) == 1
    assert cached_after({USE_UUID: "c" * 600, USE_TYPE: "d" * 600}) == 1
    assert cached_after({USE_UUID: "e"}) == 2


def test_a_long_vgpu_mode_is_cut_in_the_message() -> None:
    decision = translate_pod(_pod({"nvidia.com/vgpu-mode": "m" * 100}), DEFAULT_POLICY)
    assert isinstance(decision, Refusal)
    assert f"nvidia.com/vgpu-mode={'m' * 80} asks for a GPU mode" in decision.message


def test_the_bounds_messages_are_exact() -> None:
    over = translate_pod(_pod({}, MAX_TEMPLATES_PER_POD + 1), DEFAULT_POLICY)
    assert isinstance(over, Refusal) and (over.code, over.reason) == (422, "too-many-templates")
    assert over.message == (
        "the pod needs 17 ResourceClaimTemplates (one for each distinct GPU request); at most 16"
        " are made for one pod: give its GPU containers identical requests, or split the pod"
    )
    long_value = translate_pod(_pod({USE_TYPE: "T" * 5000}), DEFAULT_POLICY)
    assert isinstance(long_value, Refusal) and long_value.code == 422
    assert long_value.reason == "annotation-too-long"
    assert long_value.message == (
        "annotation nvidia.com/use-gputype is 5000 characters long; legacy values are short"
        " UUID or type lists (at most 4096): list fewer"
    )
    assert MAX_TEMPLATES_PER_POD == 16 and MAX_TEMPLATE_BYTES_PER_POD == 256 * 1024
    assert MAX_ANNOTATION_VALUE == 4096


def test_containers_per_pod_are_bounded() -> None:
    """Second hostile-callers issue, finding 7: a direct caller's review of 40,000 containers
    cost 0.6 s of translation; kube-apiserver cannot store a GPU pod with that many."""

    def pod(count: int) -> dict[str, Any]:
        limits = {"nvidia.com/gpu": "1"}
        containers = [{"name": f"c{i}", "resources": {"limits": limits}} for i in range(count)]
        return {"spec": {"containers": containers}}

    assert isinstance(translate_pod(pod(MAX_CONTAINERS_PER_POD), DEFAULT_POLICY, "a"), Converted)
    refused = translate_pod(pod(MAX_CONTAINERS_PER_POD + 1), DEFAULT_POLICY, "a")
    assert isinstance(refused, Refusal) and refused.code == 422
    assert refused.message == (
        f"the pod has {MAX_CONTAINERS_PER_POD + 1} containers; at most"
        f" {MAX_CONTAINERS_PER_POD} are converted in one pod"
    )
    cpu_only = {"spec": {"containers": [{"name": f"c{i}"} for i in range(20_000)]}}
    assert not isinstance(translate_pod(cpu_only, DEFAULT_POLICY, "a"), Refusal)
