"""Issue 11, caller authentication: with --client-ca-file the webhook answers only callers
with a certificate that CA signed. A real kube-apiserver presents one, configured as a cluster
operator would (AdmissionConfiguration, MutatingAdmissionWebhook's kubeConfigFile); anyone
else who reaches the port is refused at the TLS handshake."""

from __future__ import annotations

import base64
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.controlplane.for_pytest import start_plane
from tests.controlplane.gpu_node import GpuNode
from tests.controlplane.pki import Pki
from tests.support.cluster import Cluster
from tests.support.pods import gpu_pod
from tests.support.webhook_in_process import InProcessWebhook
from tests.support.webhook_process import Webhook


@pytest.fixture(scope="module")
def callers(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """The CA of the webhook's callers, and kube-apiserver's client certificate from it."""
    return Pki(tmp_path_factory.mktemp("callers"))


@pytest.fixture(scope="module")
def authenticating(tmp_path_factory: pytest.TempPathFactory, callers: Pki) -> Iterator[Cluster]:
    """kube-apiserver 1.36 that presents its client certificate to every webhook."""
    folder = tmp_path_factory.mktemp("client-auth")
    pair = callers.issue("kube-apiserver-webhook-client", "kube-apiserver")
    kubeconfig = folder / "webhook-clients.kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "users": [
                    {
                        "name": "*",  # every webhook; or the webhook's host:port
                        "user": {"client-certificate": str(pair.cert), "client-key": str(pair.key)},
                    }
                ],
            }
        )
    )
    admission = folder / "admission.yaml"
    admission.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "apiserver.config.k8s.io/v1",
                "kind": "AdmissionConfiguration",
                "plugins": [
                    {
                        "name": "MutatingAdmissionWebhook",
                        "configuration": {
                            "apiVersion": "apiserver.config.k8s.io/v1",
                            "kind": "WebhookAdmissionConfiguration",
                            "kubeConfigFile": str(kubeconfig),
                        },
                    }
                ],
            }
        )
    )
    plane = start_plane(
        "1.36",
        folder / "plane",
        capacity=True,
        apiserver_args=(f"--admission-control-config-file={admission}",),
    )
    try:
        node = GpuNode.default()
        yield Cluster(plane, node, node.register(plane), plane.folder)
    finally:
        plane.stop()


def _register(cluster: Cluster, webhook: Webhook) -> None:
    bundle = base64.b64encode(webhook.ca_file.read_bytes()).decode()
    configuration = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "hami-dra-webhook"},
        "webhooks": [
            {
                "name": "hami-dra-webhook.project-hami.io",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "NoneOnDryRun",
                "failurePolicy": "Fail",
                "clientConfig": {
                    "url": f"https://127.0.0.1:{webhook.port}/mutate",
                    "caBundle": bundle,
                },
                "rules": [
                    {
                        "operations": ["CREATE"],
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["pods"],
                    }
                ],
                "namespaceSelector": {
                    "matchExpressions": [
                        {
                            "key": "kubernetes.io/metadata.name",
                            "operator": "NotIn",
                            "values": ["kube-system"],
                        }
                    ]
                },
            }
        ],
    }
    cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(configuration))


def _handshake(webhook: Webhook, certificate: tuple[Path, Path] | None) -> None:
    context = webhook.context()
    if certificate is not None:
        context.load_cert_chain(*certificate)
    with (
        socket.create_connection(("127.0.0.1", webhook.port), timeout=5) as sock,
        context.wrap_socket(sock, server_hostname="localhost") as tls,
    ):
        tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        if not tls.recv(100):  # TLS 1.3: a refused certificate shows on the first read
            raise ConnectionResetError("closed")


def test_only_callers_with_a_client_certificate_get_answers(
    authenticating: Cluster, callers: Pki, tmp_path: Path
) -> None:
    webhook = InProcessWebhook(
        tmp_path,
        *("--kubeconfig", str(authenticating.plane.admin_kubeconfig), "--gc-interval", "0"),
        *("--client-ca-file", str(callers.ca)),
    )
    try:
        _register(authenticating, webhook)
        namespace = authenticating.create_namespace("authenticated")
        authenticating.apply(gpu_pod("trainer", {"nvidia.com/gpu": 1}), namespace=namespace)
        pod = authenticating.pod(namespace, "trainer")
        assert pod["spec"]["resourceClaims"], "kube-apiserver's call was not answered"
        # Anyone else: no certificate, or one another CA signed.
        with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)):
            _handshake(webhook, None)
        stranger = Pki(tmp_path / "stranger").issue("stranger", "kube-apiserver")
        with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)):
            _handshake(webhook, (stranger.cert, stranger.key))
        # A certificate of the callers' CA is answered.
        caller = callers.issue("another-caller", "caller")
        _handshake(webhook, (caller.cert, caller.key))
        # The probes stay on the plain operations port, which asks nothing of the kubelet.
        assert webhook.get_ops("/readyz")[0] == 200
    finally:
        webhook.stop()


def test_expired_and_other_purpose_certificates_of_the_callers_ca(
    callers: Pki, tmp_path: Path
) -> None:
    """Second hostile-callers issue, finding 8: an expired certificate of the callers' CA is
    refused at the handshake, and so is one whose extended key usage is another purpose (a
    server's); one for another client of that CA is answered: the CA is the only check (its
    identity is not), as the README says, so the CA must be one of the webhook's callers only."""
    webhook = InProcessWebhook(tmp_path, "--gc-interval", "0", "--client-ca-file", str(callers.ca))
    try:
        expired = callers.issue("expired", "kube-apiserver", expired=True)
        with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)):
            _handshake(webhook, (expired.cert, expired.key))
        server = callers.issue("a-server", "a-server", hosts=("a-server.example",))
        with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)):
            _handshake(webhook, (server.cert, server.key))
        other_client = callers.issue("other-client", "someone-else")
        _handshake(webhook, (other_client.cert, other_client.key))
    finally:
        webhook.stop()
