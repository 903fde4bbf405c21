"""Hypothesis strategies for whole AdmissionReview documents, malformed ones included: the
fuzz test posts them to the real endpoint, the decode differential test reads them both ways."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tests.support.reviews import replica_pod, review
from tests.support.strategies import LEGACY, pods

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=30,
)
quantities = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.from_regex(
        r"\A[+-]?[0-9]{0,25}(\.[0-9]{0,5})?([eE][+-]?[0-9]{1,3}|Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|u|n)?\Z"
    ),
    st.sampled_from(
        ["", " 1", "1 ", "\uff11", "\u0663", "0x10", "1_000", "NaN", "inf", "1e400", "--1"]
    ),
    st.text(max_size=8),
)
hostile_text = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8"), max_size=40),
    st.sampled_from(
        [
            '"] || true || ["',
            '\\" || true || \\"',
            "') || true || ('",
            "\x00",
            "\u202e",
            "a" * 5000,
            ",,,",
            " , A100 ,",
        ]
    ),
)
PATHS = [
    (),
    ("request",),
    ("request", "uid"),
    ("request", "kind"),
    ("request", "operation"),
    ("request", "object"),
    ("request", "object", "metadata"),
    ("request", "object", "metadata", "annotations"),
    ("request", "object", "metadata", "labels"),
    ("request", "object", "spec"),
    ("request", "object", "spec", "containers"),
    ("request", "object", "spec", "containers", 0),
    ("request", "object", "spec", "containers", 0, "resources"),
    ("request", "object", "spec", "containers", 0, "resources", "limits"),
    ("request", "object", "spec", "containers", 0, "env"),
    ("request", "object", "spec", "containers", 0, "name"),
    ("request", "object", "spec", "resourceClaims"),
    ("request", "object", "spec", "schedulerName"),
    ("request", "dryRun"),
    ("request", "oldObject"),
    ("request", "namespace"),
    ("apiVersion",),
    ("kind",),
]


def _set(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    node = document
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return document


@st.composite
def wrong_types(draw: st.DrawFn) -> tuple[str, Any]:
    document = review(replica_pod())
    return "wrong-type", _set(document, draw(st.sampled_from(PATHS)), draw(json_values))


@st.composite
def generated_pods(draw: st.DrawFn) -> tuple[str, Any]:
    pod = draw(pods())
    annotations = draw(
        st.dictionaries(
            st.sampled_from(
                [
                    "nvidia.com/use-gputype",
                    "nvidia.com/nouse-gputype",
                    "nvidia.com/use-gpuuuid",
                    "nvidia.com/nouse-gpuuuid",
                    "hami.io/gpu-scheduler-policy",
                ]
            ),
            hostile_text,
            max_size=3,
        )
    )
    if annotations and "metadata" in pod:
        pod["metadata"]["annotations"] = annotations
    operation = draw(st.sampled_from(["CREATE", "CREATE", "CREATE", "UPDATE", "DELETE"]))
    return "pod", review(
        pod,
        operation=operation,
        old=pod if operation != "CREATE" else None,
        dry_run=draw(st.booleans()),
    )


@st.composite
def odd_quantities(draw: st.DrawFn) -> tuple[str, Any]:
    limits = {
        key: draw(quantities)
        for key in draw(st.lists(st.sampled_from(LEGACY), min_size=1, unique=True))
    }
    return "quantities", review(replica_pod(limits))


@st.composite
def many_containers(draw: st.DrawFn) -> tuple[str, Any]:
    count = draw(st.integers(1, 100))
    names = draw(
        st.lists(st.sampled_from(["a", "b", "c", "cuda", "x" * 63]), min_size=count, max_size=count)
    )  # duplicates on purpose
    pod = replica_pod()
    pod["spec"]["containers"] = [
        {
            "name": name,
            "image": "i",
            "resources": {
                "limits": {
                    "nvidia.com/gpu": draw(st.sampled_from(["0", "1", "2"])),
                    "nvidia.com/gpumem": "100",
                }
            },
        }
        for name in names
    ]
    return "many", review(pod)


@st.composite
def random_shapes(draw: st.DrawFn) -> tuple[str, Any]:
    return "shape", draw(json_values)


REVIEWS = st.one_of(
    generated_pods(), wrong_types(), odd_quantities(), many_containers(), random_shapes()
)
