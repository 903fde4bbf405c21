"""Issue 11, findings 10, 12, 15 and 20, through the real webhook process: what a caller who
reaches the port, or may create pods, could make it write, and how it stops."""

from __future__ import annotations

import json
import re
import signal
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hami_dra_webhook.server.settings import Settings
from tests.support.apiserver_standin import StandIn
from tests.support.cluster import Cluster, wait_for
from tests.support.reviews import replica_pod, review
from tests.support.webhook_process import Webhook


@pytest.fixture
def webhook(kube: Cluster, tmp_path: Path) -> Iterator[Webhook]:
    process = Webhook(
        tmp_path,
        *("--kubeconfig", str(kube.plane.admin_kubeconfig), "--gc-interval", "0"),
        *("--excluded-namespaces", "kube-system,hami-system"),
    )
    yield process
    process.stop()


def _templates(kube: Cluster, namespace: str) -> list[str]:
    items = kube.get("resourceclaimtemplates", "-n", namespace)["items"]
    return [t["metadata"]["name"] for t in items]


@pytest.mark.plane
def test_excluded_namespaces_get_no_templates_from_a_direct_caller(
    webhook: Webhook, kube: Cluster
) -> None:
    """Finding 10: a caller without credentials put a review with namespace kube-system on
    the wire, and a template was created there, in a namespace the chart excludes."""
    before = _templates(kube, "kube-system")
    status, body = webhook.post(review(replica_pod(), namespace="kube-system"))
    answer = body["response"]
    assert status == 200 and answer["allowed"] is True and "patch" not in answer
    assert any("excluded" in w for w in answer.get("warnings", []))
    assert _templates(kube, "kube-system") == before


@pytest.mark.plane
def test_a_refused_review_writes_nothing(webhook: Webhook, kube: Cluster) -> None:
    """Finding 10: a review that ended refused still left 908 templates behind. A pod over a
    bound is refused before the first template is written."""
    namespace = kube.create_namespace("refused")
    pod = replica_pod()
    pod["spec"]["containers"] = [
        {
            "name": f"c{i}",
            "image": "cuda",
            "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(1000 + i)}},
        }
        for i in range(40)
    ]
    answer = webhook.post(review(pod, namespace=namespace))[1]["response"]
    assert answer["allowed"] is False and "at most 16" in answer["status"]["message"]
    assert _templates(kube, namespace) == []


@pytest.mark.plane
def test_privileged_ephemeral_container_in_a_gpu_pod_is_refused(webhook: Webhook) -> None:
    """Finding 20: a privileged ephemeral container added to a GPU pod was never checked."""
    converted = replica_pod()
    converted["metadata"]["labels"] = {"hami.io/dra": "true"}
    debug = {"name": "debugger", "image": "busybox", "securityContext": {"privileged": True}}
    added = {**converted, "spec": {**converted["spec"], "ephemeralContainers": [debug]}}
    request = review(added, operation="UPDATE", old=converted)
    request["request"]["subResource"] = "ephemeralcontainers"
    answer = webhook.post(request)[1]["response"]
    assert (
        answer["allowed"] is False
        and "ephemeral container 'debugger'" in answer["status"]["message"]
    )
    unprivileged = {**debug, "securityContext": {}}
    calm = {**converted, "spec": {**converted["spec"], "ephemeralContainers": [unprivileged]}}
    request = review(calm, operation="UPDATE", old=converted)
    request["request"]["subResource"] = "ephemeralcontainers"
    assert webhook.post(request)[1]["response"]["allowed"] is True


@pytest.mark.timed  # it measures under load, or holds a time bound: alone
def test_an_api_answering_a_byte_at_a_time_holds_nothing_up(
    standin: StandIn, tmp_path: Path
) -> None:
    """Finding 12: an API answering one byte at a time kept all 8 worker threads busy, and
    admissions kept failing for 55 s after the API was healthy again."""
    webhook = Webhook(
        tmp_path,
        *("--kubeconfig", str(standin.kubeconfig(tmp_path)), "--gc-interval", "0"),
        *("--admission-budget", "1"),
    )
    try:
        standin.trickle.add(("POST", "templates"))
        answers: list[dict[str, Any]] = []

        def admit(memory: int) -> None:
            pod = replica_pod()
            pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem"] = str(memory)
            answers.append(webhook.post(review(pod))[1]["response"])

        started = time.monotonic()
        threads = [threading.Thread(target=admit, args=(1000 + i,)) for i in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert time.monotonic() - started < 4
        assert len(answers) == 16 and not any(a["allowed"] for a in answers)
        assert {a["status"]["code"] for a in answers} <= {503, 504}
        standin.trickle.clear()
        healthy = time.monotonic()
        answer = webhook.post(review(replica_pod()))[1]["response"]
        assert answer["allowed"] is True and time.monotonic() - healthy < 1.5
    finally:
        webhook.stop()


@pytest.mark.timed  # it measures under load, or holds a time bound: alone
def test_sigterm_drains_before_the_listener_closes(tmp_path: Path) -> None:
    """Finding 15: SIGTERM stopped accepting connections at once, while kube-apiserver still
    sends to the endpoint that is going away."""
    webhook = Webhook(tmp_path, "--gc-interval", "0", "--drain-delay", "2")
    try:
        connection = webhook.connection()
        assert webhook.post(review(replica_pod()), connection)[0] == 200
        webhook.process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        wait_for(lambda: webhook.get_ops("/readyz")[0] == 503, "readyz to say shutting down")
        assert b"shutting down" in webhook.get_ops("/readyz")[1]
        # Still answered during the drain: on the kept connection, and on new ones.
        assert webhook.post(review(replica_pod()), connection)[0] == 200
        assert webhook.post(review(replica_pod()))[0] == 200
        assert time.monotonic() - signalled < 2
        webhook.process.wait(timeout=15)
        assert time.monotonic() - signalled >= 2
        connection.close()
    finally:
        webhook.stop()


def _tls(webhook: Webhook) -> ssl.SSLSocket:
    raw = socket.create_connection((webhook.host, webhook.port), timeout=10)
    return webhook.context().wrap_socket(raw, server_hostname=webhook.host)


def _post_on(connection: ssl.SSLSocket, body: bytes) -> bytes:
    """POST /mutate on a kept connection; the answer's head, lower-cased (the body is read)."""
    connection.sendall(
        b"POST /mutate HTTP/1.1\r\nhost: webhook\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(body), body)
    )
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        assert chunk, f"closed before an answer: {data!r}"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    head = head.lower()
    found = re.search(rb"content-length: (\d+)", head)
    assert found is not None, head
    while len(rest) < int(found.group(1)):
        chunk = connection.recv(65536)
        assert chunk, "closed inside an answer"
        rest += chunk
    return head


def _closed_by_the_server(connection: ssl.SSLSocket) -> bool:
    connection.settimeout(5)
    try:
        return connection.recv(1) == b""
    except (ConnectionResetError, ssl.SSLEOFError):
        return True
    except TimeoutError:
        return False


@pytest.mark.timed  # it measures under load, or holds a time bound: alone
def test_the_drain_closes_kept_connections_after_an_answer_never_under_a_request(
    tmp_path: Path,
) -> None:
    """Issue 24: during a rollout one create in 200 failed with kube-apiserver's `EOF`: the
    replica going away closed its idle kept connections at SIGTERM while kube-apiserver was
    writing a request on one (Go's client does not retry a POST). During the drain every answer
    says `connection: close` and the server closes that connection after it, so the client
    retires each connection itself; a connection idle since before SIGTERM is still answered
    in the drain (then closed the same way)."""
    webhook = Webhook(tmp_path, "--gc-interval", "0", "--drain-delay", "3")
    opened: list[ssl.SSLSocket] = []
    try:
        body = json.dumps(review(replica_pod())).encode()
        used, idle = _tls(webhook), _tls(webhook)
        opened += (used, idle)
        for connection in (used, idle):
            head = _post_on(connection, body)
            assert head.startswith(b"http/1.1 200") and b"connection: close" not in head, head
        webhook.process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        wait_for(lambda: webhook.get_ops("/readyz")[0] == 503, "readyz to say shutting down")
        head = _post_on(used, body)
        assert head.startswith(b"http/1.1 200") and b"connection: close" in head, head
        assert _closed_by_the_server(used)
        time.sleep(max(0.0, signalled + 1 - time.monotonic()))
        head = _post_on(idle, body)  # kept open through the first second of the drain
        assert head.startswith(b"http/1.1 200") and b"connection: close" in head, head
        assert _closed_by_the_server(idle)
        fresh = _tls(webhook)
        opened.append(fresh)
        head = _post_on(fresh, body)
        assert head.startswith(b"http/1.1 200") and b"connection: close" in head, head
        assert _closed_by_the_server(fresh)
        assert time.monotonic() - signalled < 3, "the drain ended before the checks"
        webhook.process.wait(timeout=15)  # by the signal, as uvicorn re-raises it
    finally:
        for connection in opened:
            connection.close()
        webhook.stop()


def test_idle_connections_outlive_kube_apiservers_idle_timeout() -> None:
    """Issue 24: the webhook closed a kept connection after 30 s idle, kube-apiserver only after
    90 (k8s.io/apimachinery pkg/util/net SetOldTransportDefaults: net/http's DefaultTransport
    IdleConnTimeout), so a request could cross the webhook's close and fail with `EOF`. The
    client must be the one that closes an idle connection."""
    assert Settings().idle_timeout > 90
    assert Settings(idle_timeout=5).idle_timeout == 5


def test_sighup_loses_nothing(tmp_path: Path) -> None:
    """Finding 15: SIGHUP killed the process at once, losing in-flight requests."""
    webhook = Webhook(tmp_path, "--gc-interval", "0")
    try:
        connection = webhook.connection()
        statuses: list[int] = []
        stop = threading.Event()

        def keep_admitting() -> None:
            while not stop.is_set():
                statuses.append(webhook.post(review(replica_pod()), connection)[0])

        thread = threading.Thread(target=keep_admitting)
        thread.start()
        for _ in range(5):
            webhook.process.send_signal(signal.SIGHUP)
            time.sleep(0.2)
        stop.set()
        thread.join()
        connection.close()
        assert webhook.process.poll() is None and statuses and set(statuses) == {200}
        wait_for(lambda: "SIGHUP: certificate files" in webhook.log(), "the SIGHUP log line")
    finally:
        webhook.stop()


@pytest.mark.timed  # it measures under load, or holds a time bound: alone
def test_many_containers_of_one_name_hold_nothing_up(tmp_path: Path) -> None:
    """Finding 9: one 1.58 MB pod of same-named containers held the event loop 47.7 s (claim
    naming was quadratic), and a normal request waited 47.2 s."""
    webhook = Webhook(tmp_path, "--gc-interval", "0")
    try:
        pod = replica_pod()
        container = {"name": "c", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
        pod["spec"]["containers"] = [container] * 20000
        body = json.dumps(review(pod)).encode()
        assert len(body) > 1_500_000
        answers: list[dict[str, Any]] = []
        attack = threading.Thread(target=lambda: answers.append(webhook.post(body)[1]))
        started = time.monotonic()
        attack.start()
        time.sleep(0.05)
        normal = time.monotonic()
        assert webhook.post(review(replica_pod()))[1]["response"]["allowed"] is True
        waited = time.monotonic() - normal
        attack.join(timeout=30)
        assert answers and answers[0]["response"]["allowed"] is False
        message = answers[0]["response"]["status"]["message"]
        # Refused before any name is looked at: more containers than a pod can have.
        assert message == "the pod has 20000 containers; at most 10000 are converted in one pod"
        assert time.monotonic() - started < 5 and waited < 2, waited
    finally:
        webhook.stop()


@pytest.mark.timed  # it measures under load, or holds a time bound: alone
def test_large_and_distinct_annotations_do_not_grow_the_process(tmp_path: Path) -> None:
    """Findings 7 and 8 through the real process: 100 pods with 2.9 MB numa-bind values took
    RSS from 77 to 360 MiB; distinct type/UUID lists of valid size grew the caches to 636 MiB."""
    from tests.support.attack import rss_mib, warmed_baseline

    webhook = Webhook(tmp_path, "--gc-interval", "0")
    try:
        baseline = warmed_baseline(webhook)
        connection = webhook.connection(timeout=30)
        for index in range(100):
            pod = replica_pod()
            pod["metadata"]["annotations"] = {"nvidia.com/numa-bind": f"{index}" + "x" * 2_900_000}
            assert webhook.post(review(pod), connection)[0] == 200
        for index in range(1000):
            pod = replica_pod()
            kinds = ",".join(f"T{index:04d}-{n:03d}" for n in range(400))[:4000]
            pod["metadata"]["annotations"] = {
                "nvidia.com/use-gputype": kinds,
                "nvidia.com/nouse-gpuuuid": f"GPU-{index:08d}," + "GPU-x," * 600,
            }
            assert webhook.post(review(pod), connection)[1]["response"]["allowed"] is True
        connection.close()
        grown = rss_mib(webhook.process.pid) - baseline
        assert grown <= 64, f"RSS grew {grown:.1f} MiB"
    finally:
        webhook.stop()
