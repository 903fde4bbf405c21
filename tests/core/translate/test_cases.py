"""One directory per translation rule: tests/cases/<rule>/{input.yaml, config.yaml?, expected.yaml}.

`pytest --update-golden` rewrites expected.yaml from the current code; review the diff.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest
import yaml

from hami_dra_webhook.core.translate.pod import translate_pod
from tests.support.cases import CASE_NAMES, CASES, load_case


def actual(name: str) -> dict[str, Any]:
    pod, policy = load_case(name)
    original = copy.deepcopy(pod)
    result = translate_pod(pod, policy, pod["metadata"].get("namespace", "default"))
    assert pod == original, "translation modified its input"
    report: dict[str, Any] = {"outcome": result.outcome}
    if result.outcome == "refused":
        # reason: the tag the log, the audit annotations, scan and dry-run name it by
        assert result.reason, "every refusal has a reason tag"
        report |= {"code": result.code, "message": result.message, "reason": result.reason}
    report["warnings"] = [str(w) for w in result.warnings]  # Attention is a str subclass
    if result.outcome == "converted":
        patched = jsonpatch.apply_patch(pod, result.patch)
        assert patched == result.apply(pod), "the patch and the applied plan disagree"
        report["object"] = patched
        report["templates"] = result.templates
    return report


def test_every_case_has_expected_output() -> None:
    assert len(CASE_NAMES) >= 50
    missing = [n for n in CASE_NAMES if not (CASES / n / "expected.yaml").exists()]
    assert missing == [], "run pytest --update-golden and review: " + ", ".join(missing)


@pytest.mark.parametrize("name", CASE_NAMES)
def test_case(name: str, update_golden: bool) -> None:
    report = actual(name)
    expected_file = CASES / name / "expected.yaml"
    if update_golden:
        expected_file.write_text(yaml.safe_dump(report, sort_keys=False, width=1 << 16))
    assert expected_file.exists(), f"{expected_file} is missing; run pytest --update-golden"
    assert report == yaml.safe_load(expected_file.read_text())
