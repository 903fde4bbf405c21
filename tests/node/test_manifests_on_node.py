"""Legacy manifests applied unchanged (HAMi v2.10's own examples, read from ../shared, and this
project's examples/): converted by the webhook pods, their claims prepared by the kubelet
through the DRA plugin stand-in, and each container sees the limits the legacy request meant
(CUDA_DEVICE_MEMORY_LIMIT_<i> in MiB, CUDA_DEVICE_SM_LIMIT_<i> in percent, per card)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.node.conftest import NodeCluster
from tests.node.workloads import EXAMPLES, HAMI_NVIDIA, gpu_env, limits_of
from tests.support.cluster import CommandFailed, wait_for
from tests.support.shared import shared_path

pytestmark = pytest.mark.node  # the real node: runs beside the quiet tests

# The stand-in's cards: two L4 (24 GiB) and one A100 (80 GiB).
SIZES_MIB = (24576, 81920)
WHOLE = {f"{size}m" for size in SIZES_MIB}


def percent(value: int) -> set[str]:
    """gpumem-percentage as legacy HAMi computes it: floor(card MiB x pct / 100) per card."""
    return {f"{size * value // 100}m" for size in SIZES_MIB}


Device = tuple[set[str], str]  # allowed memory values, cores


@dataclass(frozen=True)
class Runs:
    """The pod runs; per container, what each of its cards is limited to."""

    containers: dict[str, list[Device]]


@dataclass(frozen=True)
class Waits:
    """The pod is admitted (converted) but kube-scheduler cannot place it, for this reason."""

    reason: str


@dataclass(frozen=True)
class Refused:
    message: str


@dataclass(frozen=True)
class Case:
    pods: dict[str, Runs | Waits] = field(default_factory=dict)  # pod name or label selector
    refused: Refused | None = None


ONE_WHOLE = Runs({"ubuntu-container": [(WHOLE, "100")]})
TWO_WHOLE = Runs({"ubuntu-container": [(WHOLE, "100"), (WHOLE, "100")]})
HAMI_CASES = {
    "default_use.yaml": Case({"gpu-pod": Runs({"ubuntu-container": [({"3000m"}, "30")]})}),
    "default_use_legacy.yaml": Case({"gpu-pod": TWO_WHOLE}),
    "dynamic_mig_example.yaml": Case(refused=Refused("nvidia.com/vgpu-mode=mig")),
    "example.yaml": Case(
        {"app=cuda-sample-vector-add": Runs({"cuda-sample-vector-add": [({"3000m"}, "0")]})}
    ),
    # nvidia.com/mig-3g.20gb is not a HAMi resource: it passes unchanged, and no node offers it.
    "mig_example.yaml": Case({"gpu-pod": Waits("nvidia.com/mig-3g.20gb")}),
    "specify_card_type_not_use.yaml": Case({"gpu-pod": TWO_WHOLE}),
    # Two different A100 or V100 cards: this node has one A100.
    "specify_card_type_to_use.yaml": Case({"gpu-pod": Waits("cannot allocate all claims")}),
    "specify_scheduling_policy.yaml": Case({"gpu-pod": ONE_WHOLE}),
    "specify_uuid_not_use.yaml": Case({"gpu-pod": TWO_WHOLE}),
    # The example's UUIDs are not this node's.
    "specify_uuid_to_use.yaml": Case({"gpu-pod": Waits("cannot allocate all claims")}),
    "use_as_normal.yaml": Case({"gpu-pod1": ONE_WHOLE, "gpu-pod2": ONE_WHOLE}),
    "use_exclusive_card.yaml": Case({"gpu-pod1": TWO_WHOLE}),
    "use_memory_fraction.yaml": Case(
        {"gpu-pod": Runs({"ubuntu-container": [(percent(50), "30"), (percent(50), "30")]})}
    ),
    "use_sharing_card.yaml": Case(
        {
            "gpu-pod1": Runs({"ubuntu-container": [(percent(40), "60")]}),
            "gpu-pod2": Runs({"ubuntu-container": [(percent(60), "40")]}),
        }
    ),
    # Its PersistentVolumeClaim has no storage class this cluster provisions.
    "vllm_cross_vgpu.yaml": Case({"app=vllm-cross-vgpu": Waits("PersistentVolumeClaim")}),
}


def absent() -> None:
    """HAMi's files are never copied here: without ../shared the tests that read them skip,
    and fail where they must run (tests/support/shared.py)."""
    shared_path("hami-examples", "nvidia", what="HAMi's examples")


def _hami_examples() -> list[Path]:
    if not HAMI_NVIDIA.is_dir():
        return []
    return sorted(HAMI_NVIDIA.glob("*.yaml"))


def test_every_hami_example_has_an_expectation() -> None:
    if not HAMI_NVIDIA.is_dir():
        absent()
    assert sorted(p.name for p in _hami_examples()) == sorted(HAMI_CASES)


def _phase_reached(
    cluster: NodeCluster, namespace: str, key: str, expected: Runs | Waits
) -> list[dict[str, Any]] | None:
    if "=" in key:
        pods = cluster.pods(namespace, key)
    else:
        found = cluster.kubectl("get", "pod", key, "-n", namespace, "-o", "json", check=False)
        if found.returncode != 0:
            return None
        pods = [yaml.safe_load(found.stdout)]
    if not pods:
        return None
    for pod in pods:
        if isinstance(expected, Runs):
            if pod["status"].get("phase") != "Running":
                return None
        else:
            conditions = {c["type"]: c for c in pod["status"].get("conditions", [])}
            scheduled = conditions.get("PodScheduled")
            if (
                not scheduled
                or scheduled["status"] != "False"
                or expected.reason not in scheduled.get("message", "")
            ):
                return None
    return pods


def check_container_limits(
    cluster: NodeCluster, namespace: str, pod: dict[str, Any], container: str, devices: list[Device]
) -> None:
    name = pod["metadata"]["name"]
    env = gpu_env(
        cluster.kubectl("exec", "-n", namespace, name, "-c", container, "--", "env").stdout
    )
    limits = limits_of(env)
    assert len(limits) == len(devices), (name, container, env)
    # The driver numbers a claim's cards in its own order: compare as a multiset of matches.
    remaining = list(devices)
    for memory, cores in limits:
        match = next((d for d in remaining if memory in d[0] and cores == d[1]), None)
        assert match is not None, (
            f"{name}/{container}: {memory}, {cores} not in {remaining} ({env})"
        )
        remaining.remove(match)
    uuids = env["NVIDIA_VISIBLE_DEVICES"].split(",")
    assert len(set(uuids)) == len(devices), f"{len(devices)} different cards expected: {uuids}"


def apply_and_check(cluster: NodeCluster, namespace: str, path: Path, case: Case) -> None:
    applied = cluster.kubectl("apply", "-n", namespace, "-f", str(path), check=False)
    if case.refused is not None:
        assert applied.returncode != 0 and case.refused.message in applied.stderr, applied.stderr
        assert not cluster.get("pods", "-n", namespace)["items"]
        return
    assert applied.returncode == 0, applied.stderr
    for key, expected in case.pods.items():
        pods = wait_for(
            lambda key=key, expected=expected: _phase_reached(cluster, namespace, key, expected),
            f"{path.name}: {key} to be {type(expected).__name__}",
            timeout=120,
        )
        for pod in pods:
            # Converted: no legacy resource is left, and the pod references its claims.
            for container in pod["spec"]["containers"]:
                limits = container.get("resources", {}).get("limits", {})
                assert not [k for k in limits if k.startswith("nvidia.com/") and "mig" not in k], (
                    limits
                )
            if isinstance(expected, Runs):
                for container, devices in expected.containers.items():
                    check_container_limits(cluster, namespace, pod, container, devices)


@pytest.mark.parametrize("name", sorted(HAMI_CASES))
def test_hami_example_runs_unchanged(chart: NodeCluster, namespace: str, name: str) -> None:
    path = HAMI_NVIDIA / name
    if not path.is_file():
        absent()
    apply_and_check(chart, namespace, path, HAMI_CASES[name])


def test_example_deployment_runs_with_its_share(chart: NodeCluster, namespace: str) -> None:
    case = Case({"app=inference": Runs({"server": [({"16384m"}, "50")]})})
    apply_and_check(chart, namespace, EXAMPLES / "deployment.yaml", case)
    assert len(chart.pods(namespace, "app=inference")) == 3


def _time(value: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_init_containers_run_first_each_with_its_own_limits(
    chart: NodeCluster, namespace: str
) -> None:
    """examples/init-container.yaml: a GPU init container runs (and ends) before the app
    container starts; the restartable sidecar and the app keep their own limits."""
    chart.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "init-container.yaml"))
    selector = "job-name=warm-then-run"
    pod = wait_for(
        lambda: next(
            (
                p
                for p in chart.pods(namespace, selector)
                if p["status"].get("phase") == "Running"
                and all(
                    s.get("state", {}).get("running")
                    for s in p["status"].get("containerStatuses", [])
                )
            ),
            None,
        ),
        "the Job's pod with its app container running",
        timeout=120,
    )
    name = pod["metadata"]["name"]
    statuses = {s["name"]: s for s in pod["status"]["initContainerStatuses"]}
    warmup = statuses["warmup"]["state"]["terminated"]
    assert warmup["exitCode"] == 0
    run = pod["status"]["containerStatuses"][0]["state"]["running"]
    assert _time(warmup["finishedAt"]) <= _time(run["startedAt"])
    log = chart.kubectl("logs", "-n", namespace, name, "-c", "warmup").stdout
    assert limits_of(gpu_env(log)) == [("1000m", "0")], log
    check_container_limits(chart, namespace, pod, "metrics", [({"256m"}, "5")])
    check_container_limits(chart, namespace, pod, "run", [({"8000m"}, "0")])


def test_a_refused_manifest_leaves_nothing(chart: NodeCluster, namespace: str) -> None:
    """A pod the webhook refuses is not created, and no template is left for it."""
    path = HAMI_NVIDIA / "dynamic_mig_example.yaml"
    if not path.is_file():
        absent()
    with pytest.raises(CommandFailed, match="vgpu-mode"):
        chart.kubectl("apply", "-n", namespace, "-f", str(path))
    assert not chart.get("resourceclaimtemplates", "-n", namespace)["items"]
