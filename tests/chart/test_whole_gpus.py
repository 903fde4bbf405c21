"""hamiDraWebhook.wholeGpusByExtendedResource: the chart's DeviceClass and matchConditions, and
the webhook's own judgment (core/translate/whole_gpus.py), agree on which pods are count-only."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from hami_dra_webhook.core.legacy.selectors import SELECTOR_ANNOTATIONS
from hami_dra_webhook.core.outcome.decision import Unchanged
from hami_dra_webhook.core.settings.policy import PolicyError, policy_from_yaml
from hami_dra_webhook.core.translate.pod import translate_pod
from tests.chart.test_chart import _match, _pod
from tests.support.chart_tools import CHART, find, run_helm

CONFIG = "nvidia: {}\nhamiDraWebhook:\n  wholeGpusByExtendedResource: true\n"
POLICY = policy_from_yaml(CONFIG).policy


def _rendered(device_config: str) -> list[dict[str, Any]]:
    result = run_helm("template", "x", str(CHART), "--set-string", f"deviceConfig={device_config}")
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def _sent(pod: dict[str, Any]) -> bool:
    """Whether kube-apiserver would call the webhook: every matchCondition holds."""
    webhook = find(_RENDERED, "MutatingWebhookConfiguration")["webhooks"][0]
    return all(_match(c["expression"], pod) for c in webhook["matchConditions"])


_RENDERED = _rendered(CONFIG)


def _with(pod: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return pod | {"spec": pod["spec"] | spec}


COUNT = [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]
CASES = {
    "count-only": (_pod(COUNT), True),
    "count-in-requests-too": (
        _pod([{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1", "cpu": "1"}}}]),
        True,
    ),
    "two-containers": (_pod([*COUNT, {"name": "d", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]), True),
    "with-gpumem": (_pod([{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}}}]), False),
    "gpucores-elsewhere": (_pod([*COUNT, {"name": "d", "resources": {"limits": {"nvidia.com/gpucores": "30"}}}]), False),
    "priority": (_pod([{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/priority": "1"}}}]), False),
    "init-container": (_pod(COUNT, init=[{"name": "i", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]), False),
    "type-annotation": (_pod(COUNT) | {"metadata": {"name": "p", "annotations": {"nvidia.com/use-gputype": "A100"}}}, False),
    "hami-scheduler": (_with(_pod(COUNT), schedulerName="hami-scheduler"), False),
    "default-scheduler-named": (_with(_pod(COUNT), schedulerName="default-scheduler"), True),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_the_chart_and_the_webhook_agree_on_count_only_pods(case: str) -> None:
    pod, count_only = CASES[case]
    assert _sent(pod) is not count_only
    decision = translate_pod(pod, POLICY, "default")
    left = isinstance(decision, Unchanged) and bool(decision.left_alone)
    assert left is count_only, decision


def test_the_device_class_gets_the_extended_resource_name_only_when_asked() -> None:
    assert find(_RENDERED, "DeviceClass")["spec"]["extendedResourceName"] == "nvidia.com/gpu"
    plain = _rendered("nvidia: {}\n")
    assert "extendedResourceName" not in find(plain, "DeviceClass")["spec"]
    webhook = find(plain, "MutatingWebhookConfiguration")["webhooks"][0]
    assert [c["name"] for c in webhook["matchConditions"]] == ["names-a-legacy-gpu-resource"]


def test_the_chart_lists_the_annotations_the_webhook_reads() -> None:
    expression = find(_RENDERED, "MutatingWebhookConfiguration")["webhooks"][0]["matchConditions"][
        1
    ]["expression"]
    for annotation in SELECTOR_ANNOTATIONS:
        assert f"'{annotation}'" in expression, annotation


def test_a_policy_that_adds_to_gpu_containers_refuses_the_flag() -> None:
    with pytest.raises(PolicyError, match=r"nvidia\.runtimeClassName must reach them"):
        policy_from_yaml("nvidia: {runtimeClassName: nvidia}\n" + CONFIG.split("\n", 1)[1])


@pytest.mark.parametrize(
    ("nvidia", "name"),
    [
        ("{defaultMemory: 3000}", "nvidia.defaultMemory"),
        ("{overwriteEnv: true}", "nvidia.overwriteEnv"),
        ("{runtimeClassName: nvidia}", "nvidia.runtimeClassName"),
        ("{gpuCorePolicy: force}", "nvidia.gpuCorePolicy"),
        ("{libCudaLogLevel: 2}", "nvidia.libCudaLogLevel"),
    ],
)
def test_the_bridge_is_exact_or_refused_by_the_policy_and_the_chart(nvidia: str, name: str) -> None:
    """Issue 46, finding 4: with defaultMemory 3000 the webhook writes `memory: 3000Mi, cores:
    100` for a count-only pod, kube-scheduler's bridge a whole card. Both the webhook's policy
    and the chart's render refuse the pair, naming the setting."""
    config = f"nvidia: {nvidia}\n" + CONFIG.split("\n", 1)[1]
    with pytest.raises(PolicyError, match=rf"but {name} must reach them"):
        policy_from_yaml(config)
    rendered = run_helm("template", "x", str(CHART), "--set-string", f"deviceConfig={config}")
    assert rendered.returncode != 0
    assert f"but {name} must reach them" in rendered.stderr, rendered.stderr
    alone = run_helm(
        "template", "x", str(CHART), "--set-string", f"deviceConfig=nvidia: {nvidia}\n"
    )
    assert alone.returncode == 0, alone.stderr


def test_the_privileged_gpu_policy_covers_the_bridges_resource_name() -> None:
    """Issue 46, finding 5: a privileged count-only pod got a whole card from the bridge; the
    policy now lists the count resource the DeviceClass names, and only when it names it."""

    def listed(documents: list[dict[str, Any]]) -> str:
        policy = next(
            d
            for d in documents
            if d["kind"] == "ValidatingAdmissionPolicy"
            and d["metadata"]["name"].endswith("privileged-gpu-pods")
        )
        return str(next(v for v in policy["spec"]["variables"] if v["name"] == "gpus"))

    assert "'nvidia.com/gpu'" not in listed(_rendered("nvidia: {}\n")).replace('"', "'")
    assert "'nvidia.com/gpu'" in listed(_RENDERED).replace('"', "'")
