"""The real webhook over real TLS (CA-verified), as kube-apiserver calls it, with the real
kube-apiserver behind it (the stand-in only where a test needs the API to fail or stall): its
answers from the whole server run in this process, its output, start-up and shutdown from the
real process."""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import pytest

from tests.support.apiserver_standin import StandIn
from tests.support.cluster import Cluster, wait_for
from tests.support.reviews import replica_pod, review
from tests.support.webhook_in_process import InProcessWebhook
from tests.support.webhook_process import Webhook


@pytest.fixture
def webhook(kube: Cluster, tmp_path: Path) -> Iterator[Webhook]:
    """The whole server on the real kube-apiserver, run in this process (real TLS, real
    sockets): for what it answers. The reviews' namespace team-a starts empty."""
    kube.empty_namespace("team-a")
    served = InProcessWebhook(
        tmp_path, "--kubeconfig", str(kube.plane.admin_kubeconfig), "--gc-interval", "0"
    )
    yield served
    assert served.stop() == 0


@pytest.fixture
def process(kube: Cluster, tmp_path: Path) -> Iterator[Webhook]:
    """The real process on the real kube-apiserver: for what it writes to its output."""
    kube.empty_namespace("team-a")
    started = Webhook(
        tmp_path, "--kubeconfig", str(kube.plane.admin_kubeconfig), "--gc-interval", "0"
    )
    yield started
    started.stop()


@pytest.fixture
def faulty(standin: StandIn, tmp_path: Path) -> Iterator[Webhook]:
    """The webhook on the stand-in, whose answers a test can make fail or stall."""
    process = Webhook(
        tmp_path, "--kubeconfig", str(standin.kubeconfig(tmp_path)), "--gc-interval", "0"
    )
    yield process
    process.stop()


def templates(kube: Cluster) -> list[str]:
    return [
        t["metadata"]["name"] for t in kube.get("resourceclaimtemplates", "-n", "team-a")["items"]
    ]


@pytest.mark.plane
def test_create_is_converted_over_verified_tls(webhook: Webhook, kube: Cluster) -> None:
    document = review(replica_pod())
    status, body = webhook.post(document)
    assert status == 200
    answer = body["response"]
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    assert answer["uid"] == document["request"]["uid"] and answer["allowed"] is True
    pod = jsonpatch.apply_patch(
        document["request"]["object"], json.loads(base64.b64decode(answer["patch"]))
    )
    claim = pod["spec"]["resourceClaims"][0]
    assert templates(kube) == [claim["resourceClaimTemplateName"]]
    assert pod["metadata"]["generateName"] == "trainer-7d9f8c6b5-" and "name" not in pod["metadata"]


@pytest.mark.plane
def test_dry_run_update_delete_and_other_kinds(webhook: Webhook, kube: Cluster) -> None:
    assert webhook.post(review(replica_pod(), dry_run=True))[1]["response"]["allowed"] is True
    assert templates(kube) == []
    old = replica_pod({"cpu": "1"})
    new = replica_pod({"cpu": "1", "nvidia.com/gpu": "1"})
    update = webhook.post(review(new, operation="UPDATE", old=old))[1]["response"]
    assert json.loads(base64.b64decode(update["patch"])) == [
        {"op": "remove", "path": "/spec/containers/0/resources/limits/nvidia.com~1gpu"}
    ]
    for document in (
        review(replica_pod(), operation="DELETE", old=replica_pod()),
        review(
            {"kind": "Service", "apiVersion": "v1", "metadata": {"name": "s"}},
            kind="Service",
            resource="services",
        ),
    ):
        answer = webhook.post(document)[1]["response"]
        assert answer == {"uid": document["request"]["uid"], "allowed": True}


@pytest.mark.plane
def test_malformed_reviews_get_400_with_a_message(webhook: Webhook) -> None:
    status, body = webhook.post(b"{not json")
    assert status == 400 and "not JSON" in body["message"]
    document = review(replica_pod())
    del document["request"]["uid"]
    status, body = webhook.post(document)
    assert status == 400 and "request.uid" in body["message"]
    status, body = webhook.post(
        {"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1beta1", "request": {}}
    )
    assert status == 400 and "apiVersion" in body["message"]


@pytest.mark.plane
def test_refusals_answer_allowed_false(webhook: Webhook) -> None:
    answer = webhook.post(review(replica_pod({"nvidia.com/gpu": "-1"})))[1]["response"]
    assert (
        answer["allowed"] is False
        and answer["status"]["code"] == 422
        and "negative" in answer["status"]["message"]
    )


def test_api_failures_answer_allowed_false(faulty: Webhook, standin: StandIn) -> None:
    standin.fail[("POST", "templates")] = 500
    answer = faulty.post(review(replica_pod()))[1]["response"]
    assert answer["allowed"] is False and answer["status"]["code"] == 503


@pytest.mark.plane
def test_a_3_mib_pod_is_answered(webhook: Webhook) -> None:
    pod = replica_pod()
    pod["metadata"]["annotations"] = {"example.com/blob": "x" * (3 * 1024 * 1024)}
    status, body = webhook.post(review(pod))
    assert status == 200 and body["response"]["allowed"] is True, body


@pytest.mark.plane
def test_health_readiness_and_metrics(webhook: Webhook) -> None:
    webhook.post(review(replica_pod()))
    webhook.post(review(replica_pod({"nvidia.com/gpumem": "1Gi"})))
    webhook.post(review(replica_pod(), operation="MADE-UP-" + "x" * 1000))
    webhook.post(b"{not json")
    for get in (webhook.get, webhook.get_ops):  # HTTPS and the plain-HTTP operations port
        assert get("/healthz")[0] == 200 and get("/livez")[0] == 200
        status, body = get("/readyz")
        detail = json.loads(body)
        assert (
            status == 200
            and detail["cluster"] == "answered"
            and detail["consumableCapacity"] == "effective"
        )
    metrics = webhook.get_ops("/metrics")[1].decode()
    assert webhook.get("/metrics")[1].decode().count("\n") == metrics.count("\n")
    for line in (
        'hami_dra_admissions_total{operation="CREATE",outcome="converted"} 1.0',
        'hami_dra_admissions_total{operation="CREATE",outcome="refused"} 1.0',
        'hami_dra_admissions_total{operation="other",outcome="unchanged"} 1.0',
        'hami_dra_http_rejections_total{reason="malformed"} 1.0',
        'hami_dra_http_rejections_total{reason="too_large"} 0.0',
        "hami_dra_admissions_in_flight 0.0",
        "hami_dra_template_creations_total 1.0",
        'hami_dra_translation_cache_total{result="miss"} 2.0',
        'hami_dra_translation_cache_total{result="hit"} 0.0',
        "hami_dra_translation_cache_bytes ",
        'hami_dra_conversions_total{resource="nvidia.com/gpumem"} 1.0',
        "hami_dra_consumable_capacity_effective 1.0",
        "hami_dra_admission_duration_seconds_bucket",
        "hami_dra_certificate_expiry_timestamp_seconds 1.",
        "process_resident_memory_bytes ",
        "python_info{",
    ):
        assert line in metrics, line
    assert "_created" not in metrics and "MADE-UP" not in metrics


@pytest.mark.plane
def test_the_operations_port_never_serves_mutate(webhook: Webhook) -> None:
    assert webhook.get_ops("/mutate", "POST")[0] == 404
    assert webhook.get_ops("/bare", "POST")[0] == 404


@pytest.mark.plane
def test_one_json_log_line_per_admission(process: Webhook) -> None:
    sent = review(replica_pod())
    process.post(sent)

    def admissions() -> list[dict[str, Any]]:  # written in batches every 0.2 s
        lines = [json.loads(line) for line in process.log().splitlines() if line.startswith("{")]
        return [line for line in lines if line["message"] == "admission"]

    wait_for(admissions, "the admission's log line", timeout=5)
    assert len(admissions()) == 1
    [entry] = admissions()
    assert entry["namespace"] == "team-a" and entry["pod"] == "trainer-7d9f8c6b5-"
    assert entry["outcome"] == "converted" and entry["templates"][0].startswith("hami-gpu-")
    assert entry["duration_ms"] > 0
    # The join key with kube-apiserver's audit log: the request's uid, user and resource.
    assert entry["uid"] == sent["request"]["uid"]
    assert entry["user"] == sent["request"]["userInfo"]["username"]
    assert entry["resource"] == "v1/pods" and entry["dryRun"] is False
    assert "color_message" not in process.log() and "\x1b[" not in process.log()
    # A refusal's line is found by the same filter: its words are `refusal`, not `message`
    # (issue 65: they replaced the record's "admission").
    process.post(review(replica_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "-5"})))
    wait_for(lambda: len(admissions()) == 2, "the refusal's log line", timeout=5)
    refused = admissions()[1]
    assert refused["outcome"] == "refused" and refused["reason"], refused
    assert "negative" in refused["refusal"] and refused["message"] == "admission", refused


def test_graceful_shutdown_finishes_in_flight_admissions(faulty: Webhook, standin: StandIn) -> None:
    standin.delay[("POST", "templates")] = 1.0  # an admission that is still in flight
    answers: list[dict[str, object]] = []
    seen = standin.received[("POST", "templates")]  # the start-up capacity probe's, say
    thread = threading.Thread(target=lambda: answers.append(faulty.post(review(replica_pod()))[1]))
    thread.start()
    wait_for(
        lambda: standin.received[("POST", "templates")] > seen, "the admission to reach the API"
    )
    started = time.monotonic()
    # uvicorn re-raises SIGTERM after its graceful shutdown, so the exit status is the signal's.
    assert faulty.stop() in (0, -15)
    thread.join()
    assert answers and answers[0]["response"]["allowed"] is True  # type: ignore[index]
    assert time.monotonic() - started >= 0.2, "the process did not wait for the admission"
    assert "Finished server process" in faulty.log()


@pytest.mark.plane
def test_plain_http_is_refused(webhook: Webhook) -> None:
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", webhook.port, timeout=3)
    try:
        connection.request("GET", "/healthz")
        answer = connection.getresponse()
        answer.read()
    except (ConnectionError, http.client.HTTPException, OSError):
        return  # refused: the only right outcome
    finally:
        connection.close()
    pytest.fail(f"plain HTTP was answered with {answer.status}")


def test_offline_embedded_default(tmp_path: Path) -> None:
    """No certificate files, no cluster: self-signed certificate whose CA is logged; patches only."""
    process = Webhook(tmp_path, own_certs=False)  # ready once /readyz answers
    try:
        logged = [json.loads(line) for line in process.log().splitlines() if '"ca_file"' in line]
        assert logged, process.log_tail()
        ca_file = Path(logged[0]["ca_file"])
        connection = process.connection(process.context([ca_file]))
        status, body = process.post(review(replica_pod()), connection)
        connection.close()
        answer = body["response"]
        assert status == 200 and answer["allowed"] is True and "patch" in answer
        assert any(w.startswith("offline webhook") for w in answer["warnings"])
        # The start-up lines say what is true, once each: HTTPS on the webhook's port, plain
        # HTTP on the operations port (uvicorn's own said http:// for both, twice "Started").
        messages = [json.loads(line)["message"] for line in process.log().splitlines()]
        listening = [m for m in messages if m.startswith("listening on")]
        assert sorted(m.split(":")[0] for m in listening) == [
            "listening on http",
            "listening on https",
        ]
        assert (
            f"listening on https://127.0.0.1:{process.port}: POST /mutate, /validate-workloads,"
            " /mutate-volcano-jobs, /gate-gpu-quota, /gate-gpu-quota-claims; GET /healthz, /livez,"
            " /readyz, /metrics"
        ) in " ".join(listening)
        assert f"listening on http://127.0.0.1:{process.ops_port}: " in " ".join(listening)
        assert not [m for m in messages if "Started server process" in m or "Uvicorn running" in m]
    finally:
        process.stop()
    assert not ca_file.parent.exists(), "the generated key stays behind in /tmp"


def test_self_signed_dir_is_a_known_place(tmp_path: Path) -> None:
    """./scripts/run passes --self-signed-dir .run/tls: the README's curl finds the CA there,
    after any number of earlier runs."""
    folder = tmp_path / ".run" / "tls"
    for _ in range(2):
        process = Webhook(tmp_path, "--self-signed-dir", str(folder), own_certs=False)
        try:
            connection = process.connection(process.context([folder / "ca.crt"]))
            assert process.post(review(replica_pod()), connection)[0] == 200
            connection.close()
        finally:
            process.stop()
        assert (folder / "ca.crt").is_file()


@pytest.mark.plane
def test_tls_minimum_version_is_enforced(webhook: Webhook, tmp_path: Path) -> None:
    """Default 1.3: a client limited to TLS 1.2 cannot connect; with --tls-min-version 1.2 it can."""
    old_client = webhook.context()
    old_client.maximum_version = ssl.TLSVersion.TLSv1_2
    with pytest.raises(ssl.SSLError):
        webhook.post(review(replica_pod()), webhook.connection(old_client))
    lenient = Webhook(tmp_path / "tls12", "--tls-min-version", "1.2")
    try:
        client = lenient.context()
        client.maximum_version = ssl.TLSVersion.TLSv1_2
        connection = lenient.connection(client)
        assert lenient.post(review(replica_pod()), connection)[0] == 200
        assert connection.sock.version() == "TLSv1.2"  # type: ignore[union-attr]
        assert connection.sock.cipher()[0].startswith(("ECDHE-ECDSA-AES", "ECDHE-ECDSA-CHACHA20"))  # type: ignore[union-attr]
        connection.close()
    finally:
        lenient.stop()


def test_an_expired_certificate_makes_readyz_fail_with_the_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from hami_dra_webhook.admission.admitted import AdmissionRules
    from hami_dra_webhook.admission.mutator import PodMutator
    from hami_dra_webhook.certs.pki import issue, write
    from hami_dra_webhook.cluster.templates.store import OfflineTemplateStore
    from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
    from hami_dra_webhook.server.metrics import Metrics
    from hami_dra_webhook.server.operations import readiness
    from hami_dra_webhook.server.services import Services
    from hami_dra_webhook.server.settings import Settings
    from hami_dra_webhook.server.tls import ReloadingTLS

    _, cert, key = write(issue(["localhost"], days=1), tmp_path)
    tls = ReloadingTLS(cert, key)
    services = Services(
        Settings(),
        PodMutator(AdmissionRules(DEFAULT_POLICY), OfflineTemplateStore()),
        Metrics(),
        tls,
    )
    services.lifecycle.listening = True  # as the webhook's server sets it once its port listens
    assert readiness(services, now=tls.expires_at - 60)["ready"] is True
    expired = readiness(services, now=tls.expires_at + 1)
    assert expired["ready"] is False and expired["certificates"].startswith("expired at ")
    # Logged: once when it expires within a week (this one, at start), once when expired.
    soon = [r for r in caplog.records if "expires at" in r.getMessage()]
    assert len(soon) == 1 and soon[0].levelname == "WARNING"
    assert tls.check_expiry(tls.expires_at - 60) is False
    assert tls.check_expiry(tls.expires_at + 1) is True
    assert tls.check_expiry(tls.expires_at + 2) is True
    gone = [r for r in caplog.records if "expired at" in r.getMessage()]
    assert len(gone) == 1 and gone[0].levelname == "ERROR"


@pytest.mark.plane
def test_text_logs_cannot_be_forged_by_a_pod_name(kube: Cluster, tmp_path: Path) -> None:
    kube.empty_namespace("team-a")
    process = Webhook(
        tmp_path, "--kubeconfig", str(kube.plane.admin_kubeconfig), "--gc-interval", "0",
        "--log-format", "text",
    )  # fmt: skip
    try:
        pod = replica_pod()
        pod["metadata"]["generateName"] = "x\n2026-01-01 00:00:00,000 INFO admission forged=yes "
        process.post(review(pod))
        wait_for(lambda: "INFO admission" in process.log(), "the admission's log line", timeout=5)
        lines = process.log().splitlines()
        assert not any(line.startswith("2026-01-01") for line in lines)
        [line] = [line for line in lines if " INFO admission " in line]
        assert 'pod="x\\n2026-01-01 00:00:00,000 INFO admission forged=yes "' in line
    finally:
        process.stop()
