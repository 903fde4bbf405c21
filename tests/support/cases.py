"""The rule cases: one folder per translation rule, tests/cases/<rule>/{input.yaml,
config.yaml?, expected.yaml}, read by the core's golden test, the schema test and the end-to-end
rule cases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY, Policy, policy_from_yaml

CASES = Path(__file__).parents[1] / "cases"
CASE_NAMES = sorted(p.name for p in CASES.iterdir() if (p / "input.yaml").is_file())


def load_case(name: str) -> tuple[dict[str, Any], Policy]:
    folder = CASES / name
    pod = yaml.safe_load((folder / "input.yaml").read_text())
    config = folder / "config.yaml"
    policy = policy_from_yaml(config.read_text()).policy if config.exists() else DEFAULT_POLICY
    return pod, policy
