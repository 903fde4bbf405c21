"""HAMi's own examples of every vendor beyond NVIDIA (read from ../shared/hami-examples, never
copied here): each is converted by its vendor's profile or refused naming the vendor and why,
and none passes unchanged without a word."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from hami_dra_webhook.core.outcome.decision import Converted, Refusal, Unchanged
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY, policy_from_yaml
from hami_dra_webhook.core.translate.pod import translate_pod
from tests.support.policies import every_vendor
from tests.support.shared import shared_path

CONVERTING = policy_from_yaml(every_vendor(hygon="computeUnits: [120, 128]")).policy
NO_DRIVER = {
    "enflame": "Enflame GCU",
    "metax": "MetaX GPU",
    "iluvatar": "Iluvatar GPU",
    "mlu": "Cambricon MLU",
    "mthreads": "Moore Threads GPU",
    "kunlun": "Kunlunxin XPU",
    "vastai": "Vastai VA",
    "biren": "Biren GPU",
}


def _pods(folder: Path) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(folder.rglob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if isinstance(document, dict) and document.get("kind") == "Pod":
                found.append((path.name, document))
            elif isinstance(document, dict) and "template" in (document.get("spec") or {}):
                found.append((path.name, document["spec"]["template"]))
    return found


def _examples(vendor: str) -> list[tuple[str, dict[str, Any]]]:
    pods = _pods(shared_path("hami-examples", vendor, what="HAMi's examples"))
    assert pods, f"no pods in HAMi's {vendor} examples"
    return pods


def test_hygon_examples_convert_to_the_hygon_driver() -> None:
    for name, pod in _examples("hygon"):
        decision = translate_pod(pod, CONVERTING, "default")
        assert isinstance(decision, Converted), (name, decision)
        classes = {
            r.get("exactly", (r.get("firstAvailable") or [{}])[0]).get("deviceClassName")
            for t in decision.templates
            for r in t["spec"]["spec"]["devices"]["requests"]
        }
        assert classes == {"dra.hygon.com"}, name
        text = yaml.safe_dump(decision.templates)
        assert "DCU-" not in text  # legacy prefixes stripped from UUIDs and types


def test_ascend_examples_pin_their_chip() -> None:
    chips = {"310P": "310P3", "910A": "910A", "910B2": "910B2", "910B3": "910B3"}
    chips |= {"910B4": "910B4", "910C": "Ascend910"}
    for name, pod in _examples("ascend"):
        decision = translate_pod(pod, CONVERTING, "default")
        assert isinstance(decision, Converted), (name, decision)
        chip = chips[name.removeprefix("job-").removesuffix(".yaml")]
        assert f'productName == "{chip}"' in yaml.safe_dump(decision.templates, width=1 << 16)


def test_aws_neuron_devices_convert_and_cores_are_refused_with_the_reason() -> None:
    outcomes = {
        name: translate_pod(pod, CONVERTING, "default") for name, pod in _examples("awsneuron")
    }
    assert isinstance(outcomes["allocate_dev.yaml"], Converted)
    for name in ("allocate_core.yaml", "multi_containers.yaml"):
        refusal = outcomes[name]
        assert isinstance(refusal, Refusal) and "cannot share a device" in refusal.message


@pytest.mark.parametrize("vendor", sorted(NO_DRIVER))
def test_vendors_without_a_driver_are_named_never_silent(vendor: str) -> None:
    for name, pod in _examples(vendor):
        decision = translate_pod(pod, DEFAULT_POLICY, "default")
        assert isinstance(decision, Refusal), (vendor, name, decision)
        assert f"{NO_DRIVER[vendor]} has no DRA driver" in decision.message
        left = translate_pod(pod, policy_from_yaml("hamiDraWebhook: {otherVendors: leave}").policy)
        assert (
            isinstance(left, Unchanged) and left.left_alone and NO_DRIVER[vendor] in left.left_alone
        )


def test_a_family_with_a_driver_but_not_turned_on_says_how() -> None:
    ((_, pod), *_) = _examples("hygon")
    decision = translate_pod(pod, DEFAULT_POLICY, "default")
    assert isinstance(decision, Refusal)
    assert "hamiDraWebhook.vendors.hygon.convert: true" in decision.message
