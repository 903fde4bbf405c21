"""Every object the translation emits for the rule cases validates against Kubernetes 1.34-1.36."""

from __future__ import annotations

import pytest
import yaml

from hami_dra_webhook.core.translate.pod import translate_pod
from tests.support import dra_limits, k8s_schema
from tests.support.cases import CASE_NAMES, CASES, load_case

pytestmark = pytest.mark.skipif(not k8s_schema.available(), reason=k8s_schema.SKIP_REASON)


@pytest.mark.parametrize("name", CASE_NAMES)
def test_case_objects_validate(name: str) -> None:
    pod, policy = load_case(name)
    expected = yaml.safe_load((CASES / name / "expected.yaml").read_text())
    if expected["outcome"] == "refused" and expected.get("code") == 400:
        # Mutating admission runs before validation, so malformed pods do reach the webhook:
        # these cases are malformed on purpose, and must be.
        assert k8s_schema.errors(pod) != [], "a 400 case whose input is a valid pod"
        return
    assert k8s_schema.errors(pod) == [], "the case's input is not a valid pod"
    result = translate_pod(pod, policy, pod["metadata"]["namespace"])
    if result.outcome != "converted":
        return
    converted = result.apply(pod)
    assert k8s_schema.errors(converted) == []
    assert dra_limits.pod_problems(converted) == []
    for template in result.templates:
        assert k8s_schema.errors(template) == []
        assert dra_limits.template_problems(template) == []


def test_validator_catches_unknown_fields_and_wrong_types() -> None:
    """The schema check itself must be able to fail."""
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "x"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {"deviceClassName": "c", "count": "1", "capcity": {}},
                        }
                    ]
                }
            }
        },
    }
    found = k8s_schema.errors(template)
    assert any("capcity" in line for line in found)
    assert any("count" in line for line in found)
    assert {line.split()[0] for line in found} == set(k8s_schema.VERSIONS)


def test_dra_limits_catch_what_the_schema_cannot() -> None:
    request = {
        "name": "Bad_Name",
        "exactly": {
            "deviceClassName": "c",
            "count": 1,
            "selectors": [{"cel": {"expression": "x" * 10241}}],
        },
    }
    template = {
        "metadata": {"name": "t"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [request] * 33,
                    "constraints": [{"requests": ["nope"], "distinctAttribute": "d/uuid"}],
                }
            }
        },
    }
    problems = " | ".join(dra_limits.template_problems(template))
    for fragment in (
        "33 requests",
        "duplicate request names",
        "not a DNS label",
        "over 10 KiB",
        "unknown request nope",
    ):
        assert fragment in problems
