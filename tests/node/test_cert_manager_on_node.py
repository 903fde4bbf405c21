"""certificates.mode=certManager on the real node, the mode many users run.

cert-manager v1.21's controller and CA injector run on the node as cert-manager's own chart runs
them: its CRDs, RBAC, ServiceAccounts and the two Deployments (arguments, security context,
liveness probe) are rendered from the chart inside the pinned cert-manager module in Go's module
cache (never copied here), with images made here from tests/node/go/certmanager. Those commands
are cert-manager's own controllers, issuers and injectors wired by two small mains of this
repository, because the binaries' modules are not on the Go module proxy (the commands' docstring
says what is built in). cert-manager's own webhook is not run: nothing here needs its defaulting
or validation, and the values used below pass it (duration >= 1h, renewBefore >= 5m).

Then the chart is installed in certManager mode (the default release is taken down for it and put
back afterwards): cert-manager issues the release's CA and its serving certificate, cainjector
puts the CA into the MutatingWebhookConfiguration, the webhook pods start from the issued Secret,
and kube-apiserver's admissions reach them through the Service. The serving certificate is
renewed every ~10 s (duration 1h, renewBefore 59m50s) while a client creates GPU pods without a
pause (tests/node/creates.py); no create may fail while both replicas move to a renewed
certificate, and the caBundle must not change.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography import x509

from tests.node.build import cert_manager_module
from tests.node.conftest import NAMESPACE, RELEASE, NodeCluster
from tests.node.creates import creating_pods
from tests.node.images import CERT_MANAGER_IMAGES
from tests.support.cluster import wait_for

pytestmark = pytest.mark.node  # the real node: runs beside the quiet tests
# What this proves is the chart's and cert-manager's (issuance, injection, renewal under load),
# not the kubelet's: on one node version (it costs ~100 s and the chart's reinstall on each).
NODE_VERSIONS = ("1.37",)

CERT_MANAGER_NAMESPACE = "cert-manager"
# What of cert-manager's chart runs here: everything but its webhook and startupapicheck.
CHART_PARTS = (
    "crd-cert-manager.io_certificaterequests.yaml",
    "crd-cert-manager.io_certificates.yaml",
    "crd-cert-manager.io_clusterissuers.yaml",
    "crd-cert-manager.io_issuers.yaml",
    "crd-acme.cert-manager.io_challenges.yaml",
    "crd-acme.cert-manager.io_orders.yaml",
    "serviceaccount.yaml",
    "cainjector-serviceaccount.yaml",
    "rbac.yaml",
    "cainjector-rbac.yaml",
    "deployment.yaml",
    "cainjector-deployment.yaml",
)
SERVING = {
    "certificates.mode": "certManager",
    "certificates.certManager.duration": "1h",
    "certificates.certManager.renewBefore": "59m50s",
}
WEBHOOK_PORT = 8443


def _cert_manager_manifest(cluster: NodeCluster) -> str:
    chart = cert_manager_module() / "deploy" / "charts" / "cert-manager"
    sets = {
        "crds.enabled": "true",
        "image.repository": CERT_MANAGER_IMAGES["controller"].rsplit(":", 1)[0],
        "image.tag": CERT_MANAGER_IMAGES["controller"].rsplit(":", 1)[1],
        "image.pullPolicy": "Never",
        "cainjector.image.repository": CERT_MANAGER_IMAGES["cainjector"].rsplit(":", 1)[0],
        "cainjector.image.tag": CERT_MANAGER_IMAGES["cainjector"].rsplit(":", 1)[1],
        "cainjector.image.pullPolicy": "Never",
    }
    arguments = ["template", "cert-manager", str(chart), "-n", CERT_MANAGER_NAMESPACE]
    for key, value in sets.items():
        arguments += ["--set", f"{key}={value}"]
    for part in CHART_PARTS:
        arguments += ["--show-only", f"templates/{part}"]
    return cluster.helm(*arguments).stdout


@pytest.fixture(scope="module")
def cert_manager(chart: NodeCluster) -> NodeCluster:
    chart.ensure_namespace(CERT_MANAGER_NAMESPACE)
    # Each object names its namespace (cert-manager's, or kube-system for the leader election
    # Roles), as helm renders them.
    chart.kubectl("apply", "--server-side", "-f", "-", stdin=_cert_manager_manifest(chart))
    for deployment in ("cert-manager", "cert-manager-cainjector"):
        chart.kubectl(
            "rollout",
            "status",
            f"deployment/{deployment}",
            "-n",
            CERT_MANAGER_NAMESPACE,
            "--timeout=120s",
        )
    return chart


@pytest.fixture
def cert_manager_release(cert_manager: NodeCluster) -> Iterator[NodeCluster]:
    """The chart in certManager mode in place of the default release, which is put back after.
    Each switch of modes deletes the Secrets the other mode left, as the README says: the
    selfManaged webhook's own `<release>-tls` would otherwise be what cainjector first injects
    (its CA), until cert-manager re-issues that Secret (seen once on 1.37)."""

    def delete_leftovers() -> None:
        for secret in (f"{RELEASE}-tls", f"{RELEASE}-ca"):
            cert_manager.kubectl("delete", "secret", secret, "-n", NAMESPACE, "--ignore-not-found")

    cert_manager.helm("uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout", "120s")
    delete_leftovers()
    try:
        cert_manager.helm_install(*(f"{key}={value}" for key, value in SERVING.items()))
        yield cert_manager
    finally:
        cert_manager.helm("uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout", "120s")
        # cert-manager leaves the Secrets it wrote (no owner references by default): the
        # selfManaged chart cannot adopt them.
        delete_leftovers()
        cert_manager.helm_install()


def _secret_certificate(cluster: NodeCluster, name: str, key: str) -> x509.Certificate:
    secret = cluster.get("secret", name, "-n", NAMESPACE)
    return x509.load_pem_x509_certificate(base64.b64decode(secret["data"][key]))


def _served(pod: dict[str, Any]) -> x509.Certificate:
    """The certificate a webhook pod serves now (read from its port, not trusted)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    address = (pod["status"]["podIP"], WEBHOOK_PORT)
    with socket.create_connection(address, timeout=5) as raw, context.wrap_socket(raw) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def _webhook_pods(cluster: NodeCluster) -> list[dict[str, Any]]:
    return cluster.pods(NAMESPACE, "app.kubernetes.io/component=webhook")


def _moved_from(cluster: NodeCluster, before: dict[str, int]) -> dict[str, int] | None:
    """The serials the same webhook pods serve now, once each serves another than `before`."""
    now = {p["metadata"]["name"]: _served(p).serial_number for p in _webhook_pods(cluster)}
    moved = set(now) == set(before) and all(now[name] != before[name] for name in now)
    return now if moved else None


def _ca_bundle(cluster: NodeCluster) -> bytes:
    """Both webhooks' caBundle (cainjector fills each); empty until it has."""
    configuration = cluster.get("mutatingwebhookconfiguration", RELEASE)
    bundles = {w["clientConfig"].get("caBundle", "") for w in configuration["webhooks"]}
    return base64.b64decode(bundles.pop()) if len(bundles) == 1 else b""


def test_cert_manager_issues_injects_and_renews_without_a_failed_admission(
    cert_manager_release: NodeCluster, quiet_namespace: str
) -> None:
    namespace = quiet_namespace
    cluster = cert_manager_release
    for name in (f"{RELEASE}-ca", RELEASE):
        wait_for(
            lambda name=name: any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in cluster.get("certificate", name, "-n", NAMESPACE)
                .get("status", {})
                .get("conditions", [])
            ),
            f"Certificate {name} Ready",
            timeout=60,
        )

    # Injected by cainjector (the chart sets no caBundle in this mode): the release's own CA,
    # as the serving certificate's Secret names it (ca.crt). Waited for until it is the CA
    # Secret's certificate, both re-read: a loaded run found the bundle holding another
    # certificate of the CA's subject than the CA Secret read once before it (most likely the
    # CA issued twice at install, with the same key: rotationPolicy Never; the bundle then
    # follows once the serving certificate is next signed, every ~10 s here).
    def injected_ca() -> tuple[bytes, x509.Certificate] | None:
        bundle = _ca_bundle(cluster)
        ca = _secret_certificate(cluster, f"{RELEASE}-ca", "tls.crt")
        return (bundle, ca) if bundle and x509.load_pem_x509_certificate(bundle) == ca else None

    try:
        bundle, ca = wait_for(injected_ca, "the CA injected into the caBundle", 90)
    except AssertionError as error:
        logs = cluster.kubectl(
            "logs",
            "deployment/cert-manager-cainjector",
            "-n",
            CERT_MANAGER_NAMESPACE,
            "--tail=40",
            check=False,
        )
        revisions = cluster.get("certificate", f"{RELEASE}-ca", "-n", NAMESPACE)["status"]
        raise AssertionError(
            f"{error}\nCA Certificate status: {revisions}\ncainjector:\n{logs.stdout}{logs.stderr}"
        ) from error
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    first = _secret_certificate(cluster, f"{RELEASE}-tls", "tls.crt")
    first.verify_directly_issued_by(ca)
    dns = first.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert f"{RELEASE}.{NAMESPACE}.svc" in dns.get_values_for_type(x509.DNSName)

    pods = _webhook_pods(cluster)
    assert len(pods) == 2
    served_first = {p["metadata"]["name"]: _served(p).serial_number for p in pods}
    with creating_pods(cluster, namespace) as creates:
        # Both replicas move to a serving certificate issued after the ones they served first.
        served_after = wait_for(
            lambda: _moved_from(cluster, served_first),
            "both webhook pods serving a renewed certificate",
            120,
        )
        creates.phase = "after the renewal"
        # That move may have come before the first create (a loaded CI run saw 2 creates before
        # it): one more renewal (every ~10 s) is waited for with the client running, so that a
        # move falls inside the creates, and then enough creates to judge.
        renewed_once = served_after
        served_after = wait_for(
            lambda: _moved_from(cluster, renewed_once), "both webhook pods renewed once more", 60
        )
        wait_for(
            lambda: (
                (creates.by_phase.get("after the renewal", 0) > 10 and creates.attempted > 20)
                or None
            ),
            "creates after the renewal",
            60,
        )
    renewal = _secret_certificate(cluster, f"{RELEASE}-tls", "tls.crt")
    renewal.verify_directly_issued_by(ca)
    numbers = creates.numbers() | {"served_first": served_first, "served_after": served_after}
    print(f"cert-manager renewal: {json.dumps(numbers, default=str)}")
    (cluster.folder / "node-cert-manager.json").write_text(json.dumps(numbers, default=str))
    assert creates.attempted > 20 and not creates.failures, numbers
    assert _ca_bundle(cluster) == bundle, "a renewal of the serving certificate moved the caBundle"
    # The renewals were cert-manager's: the Certificate's revision counts its issuances.
    status = cluster.get("certificate", RELEASE, "-n", NAMESPACE)["status"]
    assert status["revision"] >= 2, status
