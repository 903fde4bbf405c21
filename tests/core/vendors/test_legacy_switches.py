"""Issue 64, item 1: what legacy HAMi v2.10 did to a pod or a device config that DRA does
differently is translated exactly or said, in the same words from the webhook, dry-run, scan and
convert (HAMi v2.10 at 4707fb02: pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go
Allocate, register.go, pkg/scheduler/scheduler.go numaBindingRequested,
pkg/util/device_scoring_weights.go)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from hami_dra_webhook.admission.admitted import AdmissionRules
from hami_dra_webhook.admission.mutator import PodMutator
from hami_dra_webhook.cli.main import main
from hami_dra_webhook.cluster.templates.store import OfflineTemplateStore
from hami_dra_webhook.core.model.types import Attention, short_warning
from hami_dra_webhook.core.outcome.decision import Converted
from hami_dra_webhook.core.review.wire import parse_review
from hami_dra_webhook.core.settings.policy import Policy, policy_from_mapping
from hami_dra_webhook.core.translate.pod import translate_pod
from hami_dra_webhook.core.vendors.nvidia_notes import policy_notes
from tests.support.loop import run
from tests.support.reviews import review


def _policy(nvidia: dict[str, Any] | None = None, sizes: tuple[str, ...] = ("24Gi",)) -> Policy:
    document = {"nvidia": nvidia or {}, "hamiDraWebhook": {"deviceMemorySizes": list(sizes)}}
    return policy_from_mapping(document).policy


def _pod(
    limits: dict[str, str],
    env: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "x", "resources": {"limits": limits}}
    if env is not None:
        container["env"] = env
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team-a", "annotations": annotations or {}},
        "spec": {"containers": [container]},
    }


def _converted(pod: dict[str, Any], policy: Policy) -> Converted:
    decision = translate_pod(pod, policy)
    assert isinstance(decision, Converted), decision
    return decision


def _capacity(decision: Converted) -> list[dict[str, str]]:
    requests = decision.templates[0]["spec"]["spec"]["devices"]["requests"]
    found = []
    for request in requests:
        for ask in [request.get("exactly"), *request.get("firstAvailable", [])]:
            if ask:
                found.append(ask["capacity"]["requests"])
    return found


def _env_of(pod: dict[str, Any], policy: Policy) -> dict[str, str]:
    import jsonpatch

    decision = _converted(pod, policy)
    patched = jsonpatch.apply_patch(pod, decision.patch)
    return {e["name"]: e.get("value") for e in patched["spec"]["containers"][0].get("env", [])}


GPU = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "8000"}


@pytest.mark.parametrize("value", ["1", "t", "T", "TRUE", "true", "True"])
def test_cuda_disable_control_true_is_said_with_the_variable(value: str) -> None:
    pod = _pod(GPU, env=[{"name": "CUDA_DISABLE_CONTROL", "value": value}])
    decision = _converted(pod, _policy())
    said = [w for w in decision.warnings if "CUDA_DISABLE_CONTROL" in w]
    assert len(said) == 1 and isinstance(said[0], Attention), decision.warnings
    assert said[0].startswith(f'container "main": CUDA_DISABLE_CONTROL={value} is not honoured')
    assert "hami.io/webhook=ignore" in said[0]


@pytest.mark.parametrize(
    "entry",
    [
        {"name": "CUDA_DISABLE_CONTROL", "value": "false"},
        {"name": "CUDA_DISABLE_CONTROL", "value": "yes"},  # ParseBool fails: ignored in legacy
        {
            "name": "CUDA_DISABLE_CONTROL",
            "valueFrom": {"configMapKeyRef": {"name": "a", "key": "b"}},
        },
        {"name": "OTHER", "value": "true"},
    ],
)
def test_cuda_disable_control_that_legacy_ignored_says_nothing(entry: dict[str, Any]) -> None:
    decision = _converted(_pod(GPU, env=[entry]), _policy())
    assert not [w for w in decision.warnings if "CUDA_DISABLE_CONTROL" in w]


def test_cuda_disable_control_in_a_container_without_a_gpu_says_nothing() -> None:
    pod = _pod(GPU)
    pod["spec"]["containers"].append(
        {"name": "cpu", "image": "x", "env": [{"name": "CUDA_DISABLE_CONTROL", "value": "true"}]}
    )
    decision = _converted(pod, _policy())
    assert not [w for w in decision.warnings if "CUDA_DISABLE_CONTROL" in w]


def test_disable_core_limit_is_the_device_plugins_env_in_every_gpu_container() -> None:
    policy = _policy({"disableCoreLimit": True})
    assert _env_of(_pod(GPU), policy)["GPU_CORE_UTILIZATION_POLICY"] == "disable"
    # gpuCorePolicy is the pod's env in legacy HAMi, which wins over the device plugin's
    forced = _policy({"disableCoreLimit": True, "gpuCorePolicy": "force"})
    assert _env_of(_pod(GPU), forced)["GPU_CORE_UTILIZATION_POLICY"] == "force"
    assert "GPU_CORE_UTILIZATION_POLICY" not in _env_of(_pod(GPU), _policy())
    assert any("disableCoreLimit" in n for n in policy_notes(policy))


@pytest.mark.parametrize(
    ("scaling", "percentage", "memory", "attention"),
    [
        (1, 50, "12Gi", False),
        (2, 50, "24Gi", False),  # legacy: 50 % of 2 x 24 GiB registered
        (2, 60, "24Gi", True),  # 29491 MiB in legacy (oversubscribed): the whole card
        (0.9, 50, "11059Mi", False),  # int(24576 x 0.9) = 22118; x 50 / 100 = 11059
        (1.5, 33, "12165Mi", False),  # int(24576 x 1.5) = 36864; x 33 / 100 = 12165
    ],
)
def test_gpumem_percentage_counts_from_the_scaled_memory(
    scaling: float, percentage: int, memory: str, attention: bool
) -> None:
    policy = _policy({"deviceMemoryScaling": scaling})
    pod = _pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": str(percentage)})
    decision = _converted(pod, policy)
    assert [c["memory"] for c in _capacity(decision)] == [memory]
    scaled = [w for w in decision.warnings if "deviceMemoryScaling" in w]
    assert bool(scaled) == (scaling != 1), decision.warnings
    assert any(isinstance(w, Attention) for w in scaled) == attention, scaled


def test_gpumem_above_the_card_names_the_scaling_that_let_it_fit() -> None:
    pod = _pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "30000"})
    scaled = _converted(pod, _policy({"deviceMemoryScaling": 2}))
    plain = _converted(pod, _policy())
    over = [w for w in scaled.warnings if "can never be placed" in w]
    assert len(over) == 1 and "deviceMemoryScaling 2" in over[0], scaled.warnings
    assert [w for w in plain.warnings if "can never be placed" in w] == [
        'container "main": 30000 MiB is more than the largest GPU (24576 MiB): it can never be'
        " placed"
    ]


@pytest.mark.parametrize(
    ("value", "warned"),
    [("true", True), ("1", True), ("True", True), ("false", False), ("0", False), ("yes", False)],
)
def test_numa_bind_is_warned_only_when_legacy_honoured_it(value: str, warned: bool) -> None:
    decision = _converted(_pod(GPU, annotations={"nvidia.com/numa-bind": value}), _policy())
    assert any("numa-bind" in w for w in decision.warnings) == warned, decision.warnings


def test_device_scoring_weights_are_warned_like_their_siblings() -> None:
    pod = _pod(GPU, annotations={"hami.io/device-scoring-weights": "slot=1,core=1,memory=3"})
    decision = _converted(pod, _policy())
    assert (
        "annotation hami.io/device-scoring-weights: GPU scoring weights are not honoured under DRA"
        in decision.warnings
    )


def test_device_split_count_is_a_note_of_the_settings_default_or_set() -> None:
    assert "(10, the default)" in policy_notes(_policy())[0]
    assert policy_notes(_policy({"deviceSplitCount": 4}))[0].startswith(
        "nvidia.deviceSplitCount (4): legacy HAMi put at most that many tasks on a card"
    )


WORDS_POD = _pod(
    {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "60"},
    env=[{"name": "CUDA_DISABLE_CONTROL", "value": "true"}],
    annotations={"hami.io/device-scoring-weights": "slot=1,core=1,memory=3"},
)
WORDS_CONFIG = {
    "nvidia": {"deviceMemoryScaling": 2},
    "hamiDraWebhook": {"deviceMemorySizes": ["24Gi"]},
}


def test_the_webhook_dry_run_scan_and_convert_say_the_same_words(tmp_path: Path) -> None:
    policy = policy_from_mapping(WORDS_CONFIG).policy
    expected = [
        w
        for w in _converted(WORDS_POD, policy).warnings
        if "x deviceMemoryScaling" in w or "CUDA_DISABLE_CONTROL" in w or "scoring" in w
    ]
    assert len(expected) == 4, expected
    mutator = PodMutator(rules=AdmissionRules(policy), store=OfflineTemplateStore())
    document = review(WORDS_POD)
    answer = run(mutator.mutate(parse_review(json.dumps(document).encode()).request)).answer
    webhook = answer["response"]["warnings"]
    assert all(short_warning(w) in webhook for w in expected), webhook

    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(WORDS_CONFIG))
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(yaml.safe_dump(WORDS_POD))

    def cli(*args: str) -> tuple[str, str]:
        out, err = io.StringIO(), io.StringIO()
        main(list(args), stdout=out, stderr=err)
        return out.getvalue(), err.getvalue()

    _, dry_run = cli("dry-run", "--config", str(config), str(manifest))
    _, convert = cli("convert", "--config", str(config), "--diff", str(manifest))
    scan, _ = cli("scan", "--config", str(config), "-o", "json", str(manifest))
    scanned = json.dumps(json.loads(scan))
    for words in expected:
        assert words in dry_run and words in convert, (words, dry_run, convert)
        if isinstance(words, Attention):
            assert json.dumps(words)[1:-1] in scanned, (words, scan)
    for note in policy_notes(policy):
        assert note in dry_run and note in convert and json.dumps(note)[1:-1] in scanned
