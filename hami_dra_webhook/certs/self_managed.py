"""Self-managed certificates: the webhook keeps its own CA and serving certificate in a Secret
and keeps its webhook configurations' caBundle pointing at that CA.

The chart creates the Secret empty; the first replica to start fills it. Replicas that race
both read, both issue, and both try a resourceVersion-guarded update: exactly one wins, the
others get 409, read the winner's certificate and use it. Renewal (30 days before expiry)
works the same way and keeps the CA, so the caBundle does not change on a renewal.
"""

from __future__ import annotations

import base64
import datetime
import logging
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from hami_dra_webhook.certs.pki import Bundle, ca_certificate, issue, service_names
from hami_dra_webhook.certs.verify import issued_by
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.kube.port import ApiError, KubeApi

RENEW_BEFORE = datetime.timedelta(days=30)
CA_KEY = "ca.key"
log = logging.getLogger("hami_dra_webhook.selfcerts")


class CertificateSetupError(RuntimeError):
    """The Secret or webhook configuration cannot be used; the message says what to fix."""


@dataclass(frozen=True)
class CertificateTarget:
    namespace: str
    secret: str
    service: str
    webhook_configuration: str
    days: int = 365
    # Names or IP addresses besides the Service's (a webhook reached by URL: admission.url).
    extra_hosts: tuple[str, ...] = ()

    @property
    def hosts(self) -> list[str]:
        return [*service_names(self.service, self.namespace), *self.extra_hosts]


def _decode(data: dict[str, str], key: str) -> bytes:
    return base64.b64decode(data.get(key, "") or "")


def bundle_from_secret(secret: JsonObject) -> tuple[Bundle, bytes] | None:
    data = secret.get("data") or {}
    try:
        bundle = Bundle(
            ca_pem=_decode(data, "ca.crt"),
            cert_pem=_decode(data, "tls.crt"),
            key_pem=_decode(data, "tls.key"),
        )
        ca_key = _decode(data, CA_KEY)
    except ValueError:
        return None
    if not (bundle.ca_pem and bundle.cert_pem and bundle.key_pem and ca_key):
        return None
    return bundle, ca_key


def usable(bundle: Bundle, names: list[str], now: datetime.datetime) -> bool:
    """Parses, key matches, signed by the CA, names covered, not due for renewal."""
    try:
        cert = x509.load_pem_x509_certificate(bundle.cert_pem)
        ca = x509.load_pem_x509_certificate(bundle.ca_pem)
        key = serialization.load_pem_private_key(bundle.key_pem, None)
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, TypeError, x509.ExtensionNotFound):
        return False
    if not issued_by(cert, ca):
        return False
    if key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    ) != cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    ):
        return False
    covered = {*sans.get_values_for_type(x509.DNSName)}
    covered |= {str(address) for address in sans.get_values_for_type(x509.IPAddress)}
    if not set(names) <= covered:
        return False
    return min(cert.not_valid_after_utc, ca.not_valid_after_utc) - now > RENEW_BEFORE


def _with_ca(ca_pem: bytes, ca_key_pem: bytes, names: list[str], days: int) -> Bundle | None:
    """A new serving certificate from the existing CA, when that CA is good for `days` more."""
    try:
        ca = x509.load_pem_x509_certificate(ca_pem)
        ca_key = serialization.load_pem_private_key(ca_key_pem, None)
    except (ValueError, TypeError):
        return None
    left = ca.not_valid_after_utc - datetime.datetime.now(datetime.UTC)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey) or left < datetime.timedelta(days=days):
        return None
    return issue(names, days=days, ca=(ca, ca_key))


async def ensure_certificates(
    api: KubeApi, target: CertificateTarget, timeout: float = 10.0
) -> Bundle:
    """The Secret's certificate, issuing or renewing it first when needed (race-safe)."""
    names = target.hosts
    for _ in range(5):
        try:
            secret = await api.get_secret(target.namespace, target.secret, timeout=timeout)
        except ApiError as error:
            raise CertificateSetupError(
                f"cannot read Secret {target.namespace}/{target.secret} ({error}); the chart"
                " creates it empty and grants get/update on it"
            ) from error
        stored = bundle_from_secret(secret)
        now = datetime.datetime.now(datetime.UTC)
        if stored is not None and usable(stored[0], names, now):
            return stored[0]
        fresh = None
        ca_key = b""
        if stored is not None:
            fresh = _with_ca(stored[0].ca_pem, stored[1], names, target.days)
            ca_key = stored[1]
        if fresh is None:
            fresh, ca_key = issue_with_ca_key(names, target.days)
        secret["data"] = {
            "ca.crt": base64.b64encode(fresh.ca_pem).decode(),
            "tls.crt": base64.b64encode(fresh.cert_pem).decode(),
            "tls.key": base64.b64encode(fresh.key_pem).decode(),
            CA_KEY: base64.b64encode(ca_key).decode(),
        }
        try:
            await api.replace_secret(secret, timeout=timeout)
        except ApiError as error:
            if error.status == 409:
                continue  # another replica wrote first: use theirs
            raise CertificateSetupError(
                f"cannot update Secret {target.namespace}/{target.secret} ({error})"
            ) from error
        log.info("issued a serving certificate into Secret %s/%s", target.namespace, target.secret)
        return fresh
    raise CertificateSetupError(f"Secret {target.namespace}/{target.secret} keeps changing")


def issue_with_ca_key(names: list[str], days: int) -> tuple[Bundle, bytes]:
    ca_key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    ca_days = max(days * 10, 3650)
    ca = ca_certificate(ca_key, now, ca_days)
    bundle = issue(names, days=days, ca=(ca, ca_key))
    ca_key_pem = ca_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return bundle, ca_key_pem


async def publish_ca_bundle(
    api: KubeApi, target: CertificateTarget, ca_pem: bytes, timeout: float = 10.0
) -> bool:
    """Point every webhook of our configurations at the CA: the MutatingWebhookConfiguration,
    and the ValidatingWebhookConfiguration of the workloads' preview where the chart made one;
    True when something changed."""
    changed = await _publish(api, target, ca_pem, timeout, validating=False)
    return await _publish(api, target, ca_pem, timeout, validating=True) or changed


async def _publish(
    api: KubeApi, target: CertificateTarget, ca_pem: bytes, timeout: float, *, validating: bool
) -> bool:
    wanted = base64.b64encode(ca_pem).decode()
    kind = "ValidatingWebhookConfiguration" if validating else "MutatingWebhookConfiguration"
    name = target.webhook_configuration
    for _ in range(5):
        try:
            config = await api.get_webhook_configuration(
                name, timeout=timeout, validating=validating
            )
        except ApiError as error:
            if validating and error.status == 404:
                return False  # workloadPreview.enabled false: there is none
            raise CertificateSetupError(f"cannot read {kind} {name} ({error})") from error
        operations: list[JsonObject] = [
            {
                "op": "test",
                "path": "/metadata/resourceVersion",
                "value": config["metadata"]["resourceVersion"],
            }
        ]
        for index, webhook in enumerate(config.get("webhooks") or []):
            if (webhook.get("clientConfig") or {}).get("caBundle") != wanted:
                operations.append(
                    {
                        "op": "add",
                        "path": f"/webhooks/{index}/clientConfig/caBundle",
                        "value": wanted,
                    }
                )
        if len(operations) == 1:
            return False
        try:
            await api.patch_webhook_configuration(
                name, operations, timeout=timeout, validating=validating
            )
        except ApiError as error:
            if error.status in (409, 422):
                continue  # changed since we read it: read again
            raise CertificateSetupError(f"cannot patch {kind} {name} ({error})") from error
        log.info("set the caBundle of %s %s", kind, name)
        return True
    raise CertificateSetupError(f"{kind} {name} keeps changing")
