"""Self-managed certificates against the real kube-apiserver, two replicas racing included."""

from __future__ import annotations

import asyncio
import base64
import datetime
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from hami_dra_webhook.certs.pki import issue, service_names
from hami_dra_webhook.certs.self_managed import (
    CertificateSetupError,
    CertificateTarget,
    ensure_certificates,
    publish_ca_bundle,
)
from hami_dra_webhook.kube.client import KubernetesApi
from tests.support.api_calls import CallsThrough
from tests.support.cluster import Cluster, api_for
from tests.support.loop import run

pytestmark = pytest.mark.plane  # the shared control plane (tests/conftest.py)


@pytest.fixture
def target(kube: Cluster) -> Iterator[CertificateTarget]:
    """A namespace with the chart's empty Secret and a webhook configuration of its own."""
    namespace = kube.create_namespace("certs")
    kube.apply(
        {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": {"name": "tls"}},
        namespace=namespace,
    )
    name = f"{namespace}-webhook"
    kube.apply(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [
                {
                    "name": "hami-dra-webhook.project-hami.io",
                    "clientConfig": {
                        "service": {
                            "name": "hami-dra-webhook",
                            "namespace": namespace,
                            "path": "/mutate",
                        }
                    },
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "NoneOnDryRun",
                }
            ],
        },
        namespace=namespace,
    )
    yield CertificateTarget(
        namespace=namespace, secret="tls", service="hami-dra-webhook", webhook_configuration=name
    )
    kube.kubectl("delete", "mutatingwebhookconfiguration", name)


def secret_data(kube: Cluster, target: CertificateTarget) -> dict[str, str]:
    return dict(kube.get("secret", target.secret, "-n", target.namespace).get("data") or {})


def ca_bundle(kube: Cluster, target: CertificateTarget) -> bytes:
    configuration = kube.get("mutatingwebhookconfiguration", target.webhook_configuration)
    return base64.b64decode(configuration["webhooks"][0]["clientConfig"].get("caBundle", ""))


def store_secret(kube: Cluster, target: CertificateTarget, data: dict[str, bytes]) -> None:
    encoded = {key: base64.b64encode(value).decode() for key, value in data.items()}
    kube.kubectl(
        "patch", "secret", target.secret, "-n", target.namespace, "--type=merge",
        "-p", f'{{"data": {__import__("json").dumps(encoded)}}}',
    )  # fmt: skip


def test_first_start_issues_and_publishes(
    kube: Cluster, real_api: KubernetesApi, target: CertificateTarget
) -> None:
    api = CallsThrough(real_api)
    bundle = run(ensure_certificates(api, target))
    assert run(publish_ca_bundle(api, target, bundle.ca_pem)) is True
    data = secret_data(kube, target)
    assert base64.b64decode(data["tls.crt"]) == bundle.cert_pem and "ca.key" in data
    cert = x509.load_pem_x509_certificate(bundle.cert_pem)
    assert cert.extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    ).value.get_values_for_type(x509.DNSName) == service_names(target.service, target.namespace)
    assert ca_bundle(kube, target) == bundle.ca_pem
    # A restart finds everything in place: no new certificate, no patch.
    again = run(ensure_certificates(api, target))
    assert again == bundle
    assert run(publish_ca_bundle(api, target, again.ca_pem)) is False
    assert api.calls["replace_secret"] == 1 and api.calls["patch_webhook_configuration"] == 1


def test_extra_hosts_are_covered(
    kube: Cluster, real_api: KubernetesApi, target: CertificateTarget
) -> None:
    with_url = CertificateTarget(
        **{**target.__dict__, "extra_hosts": ("127.0.0.1", "webhook.example")}
    )
    bundle = run(ensure_certificates(real_api, with_url))
    sans = (
        x509.load_pem_x509_certificate(bundle.cert_pem)
        .extensions.get_extension_for_class(x509.SubjectAlternativeName)
        .value
    )
    assert "webhook.example" in sans.get_values_for_type(x509.DNSName)
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    # Kept on restart; a certificate without them (the plain target's) is reissued.
    assert run(ensure_certificates(real_api, with_url)) == bundle


def test_two_replicas_racing_end_with_one_certificate(
    kube: Cluster, target: CertificateTarget, tmp_path: Path
) -> None:
    # Both replicas read the empty Secret before either writes: each waits at the barrier just
    # before its update; the real kube-apiserver takes one and answers the other 409.
    barrier = threading.Barrier(2)
    results: list[Any] = [None, None]
    apis = [CallsThrough(replica(kube)) for _ in range(2)]
    for api in apis:
        api.before["replace_secret"] = barrier.wait

    def start(index: int) -> None:
        async def race() -> None:
            try:
                bundle = await ensure_certificates(apis[index], target)
                await publish_ca_bundle(apis[index], target, bundle.ca_pem)
                results[index] = bundle
            finally:
                await apis[index].close()

        asyncio.run(race())  # each replica on a loop of its own, in its own thread

    threads = [threading.Thread(target=start, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results[0] is not None and results[0] == results[1]
    assert [api.calls["replace_secret"] for api in apis] == [1, 1]  # one won, one got 409
    assert base64.b64decode(secret_data(kube, target)["tls.crt"]) == results[0].cert_pem
    assert ca_bundle(kube, target) == results[0].ca_pem


def replica(kube: Cluster) -> KubernetesApi:
    return api_for(kube.plane.admin_kubeconfig)


def test_renewal_keeps_the_ca(
    kube: Cluster, real_api: KubernetesApi, target: CertificateTarget
) -> None:
    from cryptography.hazmat.primitives import serialization

    from hami_dra_webhook.certs.self_managed import issue_with_ca_key

    names = service_names(target.service, target.namespace)
    first, ca_key_pem = issue_with_ca_key(names, days=365)
    ca = x509.load_pem_x509_certificate(first.ca_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, None)
    expiring = issue(names, days=10, ca=(ca, ca_key))  # type: ignore[arg-type]
    store_secret(
        kube,
        target,
        {
            "ca.crt": first.ca_pem,
            "tls.crt": expiring.cert_pem,
            "tls.key": expiring.key_pem,
            "ca.key": ca_key_pem,
        },
    )
    renewed = run(ensure_certificates(real_api, target))
    assert renewed.ca_pem == first.ca_pem and renewed.cert_pem != expiring.cert_pem
    left = x509.load_pem_x509_certificate(
        renewed.cert_pem
    ).not_valid_after_utc - datetime.datetime.now(datetime.UTC)
    assert left.days >= 364


def test_wrong_names_or_garbage_are_reissued(
    kube: Cluster, real_api: KubernetesApi, target: CertificateTarget
) -> None:
    other = issue(["somebody-else"])
    store_secret(
        kube,
        target,
        {
            "ca.crt": other.ca_pem,
            "tls.crt": b"garbage",
            "tls.key": other.key_pem,
            "ca.key": b"nope",
        },
    )
    bundle = run(ensure_certificates(real_api, target))
    assert bundle.ca_pem != other.ca_pem
    assert base64.b64decode(secret_data(kube, target)["tls.crt"]) == bundle.cert_pem


def test_missing_secret_or_forbidden_says_what_to_fix(
    kube: Cluster, real_api: KubernetesApi, target: CertificateTarget
) -> None:
    missing = CertificateTarget(**{**target.__dict__, "secret": "not-there"})
    with pytest.raises(CertificateSetupError, match="creates it empty"):
        run(ensure_certificates(real_api, missing))
    # A ServiceAccount that may read the Secret but not update it: the real RBAC answers 403.
    kube.kubectl("create", "serviceaccount", "reader", "-n", target.namespace)
    kube.kubectl(
        "create", "role", "read-tls", "-n", target.namespace, "--verb=get",
        "--resource=secrets", f"--resource-name={target.secret}",
    )  # fmt: skip
    kube.kubectl(
        "create", "rolebinding", "read-tls", "-n", target.namespace, "--role=read-tls",
        f"--serviceaccount={target.namespace}:reader",
    )  # fmt: skip
    reader = api_for(kube.service_account_kubeconfig(target.namespace, "reader"))
    try:
        with pytest.raises(CertificateSetupError, match="403 Forbidden"):
            run(ensure_certificates(reader, target))
    finally:
        run(reader.close())


def test_serve_with_self_managed_certs(
    kube: Cluster, target: CertificateTarget, tmp_path: Path
) -> None:
    """The real process: fills the Secret, publishes the caBundle, serves with that certificate."""
    from tests.support.reviews import replica_pod, review
    from tests.support.webhook_process import Webhook

    process = Webhook(
        tmp_path,
        *("--kubeconfig", str(kube.plane.admin_kubeconfig), "--self-managed-certs"),
        *("--probe-namespace", target.namespace, "--cert-secret", target.secret),
        *("--webhook-config", target.webhook_configuration, "--cert-hosts", "127.0.0.1"),
        *("--cert-dir", str(tmp_path / "served"), "--gc-interval", "0"),
        own_certs=False,
        host="127.0.0.1",
    )
    try:
        ca = tmp_path / "published-ca.crt"
        ca.write_bytes(base64.b64decode(secret_data(kube, target)["ca.crt"]))
        assert ca_bundle(kube, target) == ca.read_bytes()
        connection = process.connection(process.context([ca]))  # verified, hostname included
        status, body = process.post(review(replica_pod(), namespace=target.namespace), connection)
        connection.close()
        assert status == 200 and body["response"]["allowed"] is True, body
    finally:
        process.stop()
