"""Self-managed certificates against the kube-apiserver stand-in, two replicas racing included."""

from __future__ import annotations

import asyncio
import base64
import datetime
import threading
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from hami_dra_webhook.certs import issue, service_names
from hami_dra_webhook.kube import KubernetesApi, load_configuration
from hami_dra_webhook.selfcerts import (
    CertificateSetupError,
    Target,
    ensure_certificates,
    publish_ca_bundle,
)
from tests.apiserver_standin import StandIn

TARGET = Target(
    namespace="hami-system",
    secret="hami-dra-webhook-tls",
    service="hami-dra-webhook",
    webhook_configuration="hami-dra-webhook",
)


def empty_secret(standin: StandIn) -> None:
    standin.secrets[("hami-system", TARGET.secret)] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": TARGET.secret, "namespace": "hami-system", "resourceVersion": "1"},
    }


def webhook_configuration(standin: StandIn) -> None:
    hook = {
        "name": "hami-dra-webhook.project-hami.io",
        "clientConfig": {
            "service": {"name": TARGET.service, "namespace": "hami-system", "path": "/mutate"}
        },
        "admissionReviewVersions": ["v1"],
        "sideEffects": "NoneOnDryRun",
    }
    standin.webhook_configurations[TARGET.webhook_configuration] = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": TARGET.webhook_configuration, "resourceVersion": "1"},
        "webhooks": [hook],
    }


def replica(standin: StandIn, folder: Path) -> KubernetesApi:
    configuration = load_configuration(str(standin.kubeconfig(folder)))
    assert configuration is not None
    return KubernetesApi(configuration)


def test_first_start_issues_and_publishes(standin: StandIn, kube_api: KubernetesApi) -> None:
    empty_secret(standin)
    webhook_configuration(standin)
    bundle = asyncio.run(ensure_certificates(kube_api, TARGET))
    assert asyncio.run(publish_ca_bundle(kube_api, TARGET, bundle.ca_pem)) is True
    data = standin.secrets[("hami-system", TARGET.secret)]["data"]
    assert base64.b64decode(data["tls.crt"]) == bundle.cert_pem and "ca.key" in data
    cert = x509.load_pem_x509_certificate(bundle.cert_pem)
    assert cert.extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    ).value.get_values_for_type(x509.DNSName) == service_names(TARGET.service, "hami-system")
    hook = standin.webhook_configurations[TARGET.webhook_configuration]["webhooks"][0]
    assert base64.b64decode(hook["clientConfig"]["caBundle"]) == bundle.ca_pem
    # A restart finds everything in place: no new certificate, no patch.
    again = asyncio.run(ensure_certificates(kube_api, TARGET))
    assert again == bundle
    assert asyncio.run(publish_ca_bundle(kube_api, TARGET, again.ca_pem)) is False
    assert (
        standin.count("PUT", "secret") == 1 and standin.count("PATCH", "webhookconfiguration") == 1
    )


def test_two_replicas_racing_end_with_one_certificate(standin: StandIn, tmp_path: Path) -> None:
    empty_secret(standin)
    webhook_configuration(standin)
    # Both replicas read the empty Secret before either writes.
    standin.gate[("GET", "secret")] = threading.Barrier(2)
    results: list[Any] = [None, None]

    def start(index: int) -> None:
        async def run() -> None:
            bundle = await ensure_certificates(apis[index], TARGET)
            await publish_ca_bundle(apis[index], TARGET, bundle.ca_pem)
            results[index] = bundle

        asyncio.run(run())

    for folder in (tmp_path / "r0", tmp_path / "r1"):
        folder.mkdir()
    apis = [replica(standin, tmp_path / f"r{i}") for i in range(2)]
    threads = [threading.Thread(target=start, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for api in apis:
        api.close()
    assert results[0] is not None and results[0] == results[1]
    assert (
        standin.count("PUT", "secret") == 2
    )  # both tried at the same version: one won, one got 409
    stored = standin.secrets[("hami-system", TARGET.secret)]["data"]
    assert base64.b64decode(stored["tls.crt"]) == results[0].cert_pem
    hook = standin.webhook_configurations[TARGET.webhook_configuration]["webhooks"][0]
    assert base64.b64decode(hook["clientConfig"]["caBundle"]) == results[0].ca_pem


def test_renewal_keeps_the_ca(standin: StandIn, kube_api: KubernetesApi) -> None:
    from cryptography.hazmat.primitives import serialization

    from hami_dra_webhook.selfcerts import issue_with_ca_key

    names = service_names(TARGET.service, "hami-system")
    first, ca_key_pem = issue_with_ca_key(names, days=365)
    ca = x509.load_pem_x509_certificate(first.ca_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, None)
    expiring = issue(names, days=10, ca=(ca, ca_key))  # type: ignore[arg-type]
    empty_secret(standin)
    standin.secrets[("hami-system", TARGET.secret)]["data"] = {
        "ca.crt": base64.b64encode(first.ca_pem).decode(),
        "tls.crt": base64.b64encode(expiring.cert_pem).decode(),
        "tls.key": base64.b64encode(expiring.key_pem).decode(),
        "ca.key": base64.b64encode(ca_key_pem).decode(),
    }
    renewed = asyncio.run(ensure_certificates(kube_api, TARGET))
    assert renewed.ca_pem == first.ca_pem and renewed.cert_pem != expiring.cert_pem
    left = x509.load_pem_x509_certificate(
        renewed.cert_pem
    ).not_valid_after_utc - datetime.datetime.now(datetime.UTC)
    assert left.days >= 364


def test_wrong_names_or_garbage_are_reissued(standin: StandIn, kube_api: KubernetesApi) -> None:
    empty_secret(standin)
    other = issue(["somebody-else"])
    standin.secrets[("hami-system", TARGET.secret)]["data"] = {
        "ca.crt": base64.b64encode(other.ca_pem).decode(),
        "tls.crt": base64.b64encode(b"garbage").decode(),
        "tls.key": base64.b64encode(other.key_pem).decode(),
        "ca.key": base64.b64encode(b"nope").decode(),
    }
    bundle = asyncio.run(ensure_certificates(kube_api, TARGET))
    assert bundle.ca_pem != other.ca_pem


def test_missing_secret_or_forbidden_says_what_to_fix(
    standin: StandIn, kube_api: KubernetesApi
) -> None:
    with pytest.raises(CertificateSetupError, match="creates it empty"):
        asyncio.run(ensure_certificates(kube_api, TARGET))
    empty_secret(standin)
    standin.fail[("PUT", "secret")] = 403
    with pytest.raises(CertificateSetupError, match="403 Forbidden"):
        asyncio.run(ensure_certificates(kube_api, TARGET))


def test_serve_with_self_managed_certs(standin: StandIn, tmp_path: Path) -> None:
    """The real process: fills the Secret, publishes the caBundle, serves with that certificate."""
    from tests.reviews import gpu_pod, review
    from tests.webhook_process import Webhook

    empty_secret(standin)
    webhook_configuration(standin)
    process = Webhook(
        tmp_path,
        "--kubeconfig",
        str(standin.kubeconfig(tmp_path)),
        "--self-managed-certs",
        "--probe-namespace",
        "hami-system",
        "--cert-dir",
        str(tmp_path / "served"),
        "--gc-interval",
        "0",
        own_certs=False,
    )
    try:
        ca = tmp_path / "published-ca.crt"
        ca.write_bytes(
            base64.b64decode(standin.secrets[("hami-system", TARGET.secret)]["data"]["ca.crt"])
        )
        hook = standin.webhook_configurations[TARGET.webhook_configuration]["webhooks"][0]
        assert base64.b64decode(hook["clientConfig"]["caBundle"]) == ca.read_bytes()
        context = process.context([ca])
        context.check_hostname = False  # the certificate names the Service, not localhost
        connection = process.connection(context)
        status, body = process.post(review(gpu_pod()), connection)
        connection.close()
        assert status == 200 and body["response"]["allowed"] is True
    finally:
        process.stop()
