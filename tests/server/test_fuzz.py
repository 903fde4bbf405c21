"""Fuzzing the real HTTPS endpoint (the whole server, in process) with generated AdmissionReviews.

Runs HAMI_FUZZ_EXAMPLES examples (2,000 by default, as in CI; set 100000 for a long run).
Whatever arrives: no unhandled exception, only the documented HTTP statuses (200, 400, 413),
every refusal has a message, every patch applies, no admitted pod keeps a legacy GPU resource
(except the documented cases: another scheduler, the opt-out label), and every converted pod
that was a valid pod stays valid for Kubernetes 1.34-1.36.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings

from tests.support import k8s_schema
from tests.support.review_strategies import REVIEWS
from tests.support.reviews import replica_pod, review
from tests.support.strategies import LEGACY
from tests.support.webhook_in_process import InProcessWebhook
from tests.support.webhook_process import Webhook

EXAMPLES = int(os.environ.get("HAMI_FUZZ_EXAMPLES", "2000"))
LEFT_ALONE = "left unchanged:"


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Webhook]:
    """The whole server in this process (real TLS, real sockets): what is fuzzed is its
    answers; its log is every record of warning and above."""
    process = InProcessWebhook(
        tmp_path_factory.mktemp("fuzz"),
        "--log-level",
        "warning",
        "--config",
        str(_config(tmp_path_factory.mktemp("cfg"))),
    )
    yield process
    log = process.log()
    assert process.stop() == 0
    assert "failed unexpectedly" not in log and "Traceback" not in log, log[-4000:]


def _config(folder: Path) -> Path:
    path = folder / "config.yaml"
    path.write_text("hamiDraWebhook:\n  deviceMemorySizes: [80Gi, 40Gi]\n")
    return path


def _legacy_keys_left(pod: Any) -> list[str]:
    left = []
    spec = pod.get("spec") if isinstance(pod, dict) else None
    for list_name in ("initContainers", "containers"):
        items = spec.get(list_name) if isinstance(spec, dict) else None
        for container in items if isinstance(items, list) else []:
            resources = container.get("resources") if isinstance(container, dict) else None
            for map_name in ("limits", "requests"):
                values = resources.get(map_name) if isinstance(resources, dict) else None
                if isinstance(values, dict):
                    left += [k for k in LEGACY if k in values]
    return left


class Client:
    def __init__(self, webhook: Webhook) -> None:
        self.webhook = webhook
        self.connection: http.client.HTTPSConnection | None = None

    def post(self, body: bytes) -> tuple[int, Any]:
        if self.connection is None:
            self.connection = self.webhook.connection()
        try:
            return self.webhook.post(body, self.connection)
        except (http.client.HTTPException, OSError):
            self.connection.close()
            self.connection = None
            raise


@pytest.fixture(scope="module")
def client(endpoint: Webhook) -> Iterator[Client]:
    client = Client(endpoint)
    yield client
    if client.connection is not None:
        client.connection.close()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=REVIEWS)
def test_fuzzed_reviews(client: Client, case: tuple[str, Any]) -> None:
    category, document = case
    body = json.dumps(document).encode()
    status, answer = client.post(body)
    assert status in (200, 400, 413), (status, answer)
    if status != 200:
        assert isinstance(answer, dict) and answer.get("message"), answer
        return
    response = answer["response"]
    request = document["request"]
    assert response["uid"] == request["uid"]
    if not response["allowed"]:
        assert response["status"]["message"] and 400 <= response["status"]["code"] < 500, response
        return
    assert all(isinstance(w, str) and len(w) <= 120 for w in response.get("warnings", []))
    pod = request.get("object")
    if "patch" in response:
        ops = json.loads(base64.b64decode(response["patch"]))
        pod = jsonpatch.apply_patch(pod, ops)
    is_pod_create = (
        request["kind"].get("kind") == "Pod"
        and request["kind"].get("group") == ""
        and request["operation"] == "CREATE"
    )
    if is_pod_create and _legacy_keys_left(pod):
        assert any(w.startswith(LEFT_ALONE) for w in response.get("warnings", [])), (
            response,
            _legacy_keys_left(pod),
        )
    if category == "pod" and "patch" in response and is_pod_create and k8s_schema.available():
        assert k8s_schema.errors(pod, "Pod") == []


def test_printable_text_is_not_a_crash(client: Client) -> None:
    """A hand-picked example the generator rarely finds: every printable ASCII character."""
    document = review(replica_pod())
    document["request"]["object"]["metadata"]["annotations"] = {
        "nvidia.com/use-gputype": string.printable
    }
    status, answer = client.post(json.dumps(document).encode())
    assert status == 200 and answer["response"]["allowed"] is True
