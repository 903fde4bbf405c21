"""Hypothesis strategies for schema-valid pods that ask for GPUs the legacy HAMi way (or not)."""

from __future__ import annotations

import contextlib
import copy
from typing import Any

from hypothesis import strategies as st

from hami_dra_webhook.core.settings.policy import Policy, policy_from_mapping

LEGACY = (
    "nvidia.com/gpu",
    "nvidia.com/gpumem",
    "nvidia.com/gpumem-percentage",
    "nvidia.com/gpucores",
    "nvidia.com/priority",
)
GOOD_VALUES = ("0", "1", "2", "3", "8", "30", "50", "100", "150", "4000", "24576")
BAD_VALUES = ("16Gi", "-1", "0.5", "500m", "1e3", "abc")
NAMES = ("cuda", "main", "sidecar", "a", "b", "trainer-0", "x" * 63)
ANNOTATIONS = (
    "nvidia.com/use-gpuuuid",
    "nvidia.com/nouse-gpuuuid",
    "nvidia.com/use-gputype",
    "nvidia.com/nouse-gputype",
    "nvidia.com/vgpu-mode",
    "nvidia.com/numa-bind",
    "hami.io/gpu-scheduler-policy",
    "example.com/unrelated",
)
ANNOTATION_TEXT = st.one_of(
    st.sampled_from(
        [
            "A100",
            "a100,v100",
            " , ",
            "",
            "GPU-1,GPU-2",
            'x"] || true || ["',
            "\\",
            "hami-core",
            "mig",
        ]
    ),
    st.text(max_size=30),
)


def _values(allow_bad: bool) -> st.SearchStrategy[str]:
    pool = GOOD_VALUES + (BAD_VALUES if allow_bad else ())
    return st.sampled_from(pool)


@st.composite
def resources(draw: st.DrawFn, allow_bad: bool = True) -> dict[str, Any]:
    keys = draw(st.lists(st.sampled_from((*LEGACY, "cpu", "memory")), unique=True, max_size=5))
    values = _values(allow_bad)
    limits = {
        k: draw(values) if k in LEGACY else draw(st.sampled_from(["1", "2Gi", "500m"]))
        for k in keys
    }
    out: dict[str, Any] = {}
    placement = draw(st.sampled_from(["limits", "requests", "both", "both-differ"]))
    if limits and placement in ("limits", "both", "both-differ"):
        out["limits"] = limits
    if limits and placement != "limits":
        requests = dict(limits)
        if placement == "both-differ" and requests:
            key = draw(st.sampled_from(sorted(requests)))
            requests[key] = draw(values)
        out["requests"] = requests
    if draw(st.booleans()):
        out["claims"] = [{"name": "user-claim"}]
    return out


@st.composite
def containers(draw: st.DrawFn, allow_bad: bool = True) -> list[dict[str, Any]]:
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, min_size=1, max_size=4))
    result = []
    for name in names:
        container: dict[str, Any] = {"name": name, "image": "nvidia/cuda:12.4.0-base"}
        res = draw(resources(allow_bad))
        if res:
            container["resources"] = res
        if draw(st.integers(0, 4)) == 0:
            container["env"] = [
                {"name": "CUDA_TASK_PRIORITY", "value": "0"},
                {"name": "A", "value": "b"},
            ]
        if draw(st.integers(0, 9)) == 0:
            container["securityContext"] = {"privileged": True}
        if draw(st.integers(0, 5)) == 0:
            container["restartPolicy"] = "Always"
        result.append(container)
    return result


@st.composite
def pods(draw: st.DrawFn, allow_bad: bool = True) -> dict[str, Any]:
    all_containers = draw(containers(allow_bad))
    split = draw(st.integers(0, len(all_containers) - 1))
    init, main = all_containers[:split], all_containers[split:]
    for container in main:
        container.pop("restartPolicy", None)
    spec: dict[str, Any] = {"containers": main}
    if init:
        spec["initContainers"] = init
    if any("claims" in c.get("resources", {}) for c in all_containers):
        spec["resourceClaims"] = [{"name": "user-claim", "resourceClaimName": "shared-nic"}]
    scheduler = draw(st.sampled_from([None, "hami-scheduler", "default-scheduler", "volcano"]))
    if scheduler:
        spec["schedulerName"] = scheduler
    if draw(st.integers(0, 9)) == 0:
        spec["nodeName"] = "node-1"
    if draw(st.booleans()):
        spec["nodeSelector"] = {"gpu": "true"}
        spec["tolerations"] = [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
        ]
    metadata: dict[str, Any] = {"generateName": "job-", "namespace": "team-a"}
    keys = draw(st.lists(st.sampled_from(ANNOTATIONS), unique=True, max_size=4))
    if keys:
        metadata["annotations"] = {k: draw(ANNOTATION_TEXT) for k in keys}
    if draw(st.booleans()):
        metadata["labels"] = {"app": "train"}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    if draw(st.integers(0, 9)) == 0:
        del pod["metadata"]  # as in a workload's pod template
    return pod


def policies() -> st.SearchStrategy[Policy]:
    return st.builds(
        lambda nvidia, sizes, privileged: (
            policy_from_mapping(
                {
                    "nvidia": nvidia,
                    "hamiDraWebhook": {"deviceMemorySizes": sizes, "refusePrivileged": privileged},
                }
            ).policy
        ),
        st.fixed_dictionaries(
            {},
            optional={
                "defaultMemory": st.sampled_from([0, 2000]),
                "defaultCores": st.sampled_from([0, 20]),
                "defaultGPUNum": st.sampled_from([0, 1, 2]),
                "memoryFactor": st.sampled_from([1, 2]),
                "gpuCorePolicy": st.sampled_from(["default", "force"]),
                "overwriteEnv": st.booleans(),
            },
        ),
        st.sampled_from([[], ["80Gi"], ["80Gi", "40Gi", "16Gi"]]),
        st.booleans(),
    )


VALID = {
    "nvidia.com/gpu": ("1", "2", "3", "8"),
    "nvidia.com/gpumem": ("0", "1", "4000", "24576"),
    "nvidia.com/gpumem-percentage": ("0", "1", "50", "100"),
    "nvidia.com/gpucores": ("0", "30", "100", "150"),
    "nvidia.com/priority": ("0", "1"),
}


@st.composite
def valid_gpu_pods(draw: st.DrawFn) -> dict[str, Any]:
    """Pods legacy HAMi would place and kube-apiserver would accept: they must convert."""
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, min_size=1, max_size=3))
    containers = []
    for index, name in enumerate(names):
        extra = draw(st.lists(st.sampled_from(LEGACY[1:]), unique=True, max_size=4))
        keys = ["nvidia.com/gpu", *extra] if index == 0 or draw(st.booleans()) else extra
        limits = {key: draw(st.sampled_from(VALID[key])) for key in keys}
        limits |= draw(st.sampled_from([{}, {"cpu": "1"}, {"memory": "2Gi", "cpu": "500m"}]))
        resources: dict[str, Any] = {"limits": limits} if limits else {}
        if limits and draw(st.booleans()):
            resources["requests"] = dict(limits)
        container: dict[str, Any] = {"name": name, "image": "nvidia/cuda:12.4.0-base"}
        if resources:
            container["resources"] = resources
        if draw(st.booleans()):
            container["env"] = [{"name": "A", "value": "b"}]
        containers.append(container)
    spec: dict[str, Any] = {"containers": containers}
    scheduler = draw(st.sampled_from([None, "hami-scheduler", "default-scheduler"]))
    if scheduler:
        spec["schedulerName"] = scheduler
    metadata: dict[str, Any] = {"generateName": "job-", "namespace": "team-a"}
    if draw(st.booleans()):
        metadata["labels"] = draw(st.sampled_from([{"app": "train"}, {"hami.io/dra": "false"}]))
    annotations = draw(
        st.dictionaries(
            st.sampled_from(ANNOTATIONS[:4]),
            st.sampled_from(["A100", "a100,v100", "", "GPU-1,GPU-2", 'x"] || true || ["']),
            max_size=3,
        )
    )
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def valid_policies() -> st.SearchStrategy[Policy]:
    """Policies under which every valid GPU pod converts (memory sizes known)."""
    return st.builds(
        lambda nvidia, sizes: (
            policy_from_mapping(
                {"nvidia": nvidia, "hamiDraWebhook": {"deviceMemorySizes": sizes}}
            ).policy
        ),
        st.fixed_dictionaries(
            {},
            optional={
                "defaultMemory": st.sampled_from([0, 2000]),
                "defaultCores": st.sampled_from([0, 20]),
                "memoryFactor": st.sampled_from([1, 2]),
                "overwriteEnv": st.booleans(),
            },
        ),
        st.sampled_from([["80Gi"], ["80Gi", "40Gi", "16Gi"]]),
    )


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
FIELD = st.sampled_from(
    ["name", "resources", "env", "securityContext", "image", "args", "claims", "limits"]
)


@st.composite
def odd_pods(draw: st.DrawFn) -> Any:
    """Pods of any shape: maps where maps belong, or anything else, at every level read."""
    container = st.one_of(
        JSON,
        st.dictionaries(FIELD, JSON | st.just({"limits": {"nvidia.com/gpu": "1"}}), max_size=4),
    )
    spec = st.one_of(
        JSON,
        st.fixed_dictionaries(
            {},
            optional={
                "containers": st.lists(container, max_size=3) | JSON,
                "initContainers": st.lists(container, max_size=2),
                "nodeName": JSON,
                "schedulerName": st.sampled_from(["hami-scheduler", "volcano"]) | JSON,
                "resourceClaims": JSON,
                "runtimeClassName": JSON,
                "hostNetwork": JSON,
            },
        ),
    )
    metadata = st.one_of(
        JSON,
        st.fixed_dictionaries(
            {},
            optional={
                "labels": JSON | st.just({"hami.io/webhook": "ignore"}),
                "annotations": JSON | st.just({"nvidia.com/use-gputype": "A100", "x": "y"}),
                "name": JSON,
            },
        ),
    )
    return draw(st.fixed_dictionaries({}, optional={"metadata": metadata, "spec": spec}) | JSON)


# A GPU pod that touches every field the translation reads (metadata, annotations, labels,
# scheduler, runtime class, claims, init and app containers, env, security context, requests,
# limits and claims of resources); `pods_with_odd_fields` replaces some of them with any JSON.
RICH_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "p",
        "generateName": "p-",
        "labels": {"app": "a", "hami.io/dra": "true"},
        "annotations": {
            "nvidia.com/use-gputype": "A100,H100",
            "nvidia.com/nouse-gputype": "T4",
            "nvidia.com/use-gpuuuid": "GPU-1,GPU-2",
            "nvidia.com/vgpu-mode": "hami-core",
            "hami.io/gpu-scheduler-policy": "binpack",
        },
    },
    "spec": {
        "schedulerName": "hami-scheduler",
        "runtimeClassName": "nvidia",
        "hostNetwork": False,
        "resourceClaims": [{"name": "other", "resourceClaimName": "other"}],
        "initContainers": [
            {
                "name": "init",
                "env": [{"name": "A", "value": "b"}],
                "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}},
            }
        ],
        "containers": [
            {
                "name": "cuda",
                "image": "i",
                "env": [
                    {"name": "X", "value": "y"},
                    {"name": "CUDA_TASK_PRIORITY", "valueFrom": {"fieldRef": {"fieldPath": "x"}}},
                ],
                "securityContext": {"privileged": False, "capabilities": {"add": ["SYS_ADMIN"]}},
                "resources": {
                    "limits": {
                        "nvidia.com/gpu": "2",
                        "nvidia.com/gpumem": "3000",
                        "nvidia.com/gpucores": "30",
                        "nvidia.com/priority": "1",
                        "cpu": "1",
                    },
                    "requests": {"nvidia.com/gpu": "2", "memory": "1Gi"},
                    "claims": [{"name": "other"}],
                },
            },
            {
                "name": "pct",
                "resources": {"limits": {"nvidia.com/gpumem-percentage": "50"}},
            },
            {"name": "plain", "image": "i"},
        ],
    },
}


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += _paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += _paths(inner, (*prefix, index))
    return found


RICH_PATHS = _paths(RICH_POD)[1:]


@st.composite
def pods_with_odd_fields(draw: st.DrawFn) -> tuple[dict[str, Any], list[tuple[Any, ...]]]:
    """RICH_POD with one to three of its fields (at any depth) replaced by any JSON value."""
    pod = copy.deepcopy(RICH_POD)
    chosen = draw(st.lists(st.sampled_from(RICH_PATHS), min_size=1, max_size=3, unique=True))
    for path in chosen:
        parent = pod
        for step in path[:-1]:
            if not isinstance(parent, dict | list):
                break
            try:
                parent = parent[step]
            except (KeyError, IndexError, TypeError):
                break
        else:
            if isinstance(parent, dict | list):
                with contextlib.suppress(IndexError, TypeError):
                    parent[path[-1]] = draw(JSON)
    return pod, chosen
