"""Certificates for the webhook: a CA and a serving certificate (ECDSA P-256), as files."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_FILE, CERT_FILE, KEY_FILE = "ca.crt", "tls.crt", "tls.key"


@dataclass(frozen=True)
class Bundle:
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    @property
    def ca_bundle(self) -> str:
        """The base64 caBundle of a MutatingWebhookConfiguration."""
        return base64.b64encode(self.ca_pem).decode()


def service_names(service: str, namespace: str) -> list[str]:
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def ca_certificate(
    key: ec.EllipticCurvePrivateKey,
    now: datetime.datetime,
    days: int,
    name: str = "hami-dra-webhook-ca",
) -> x509.Certificate:
    """A self-signed CA certificate for `key`."""
    return (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(_name(name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )


def issue(
    hosts: list[str],
    days: int = 365,
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None = None,
) -> Bundle:
    """A serving certificate for `hosts` (DNS names or IP addresses), signed by `ca` or by a
    new CA valid for as long as the certificate."""
    now = datetime.datetime.now(datetime.UTC)
    if ca is None:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_cert = ca_certificate(ca_key, now, days)
    else:
        ca_cert, ca_key = ca
    key = ec.generate_private_key(ec.SECP256R1())
    alt_names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            alt_names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            alt_names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(hosts[0]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return Bundle(
        ca_pem=ca_cert.public_bytes(serialization.Encoding.PEM),
        cert_pem=cert.public_bytes(serialization.Encoding.PEM),
        key_pem=key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


def write(bundle: Bundle, out_dir: Path) -> tuple[Path, Path, Path]:
    """Write ca.crt, tls.crt and tls.key (mode 0600, never readable by others even briefly)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    ca_path, cert_path, key_path = out_dir / CA_FILE, out_dir / CERT_FILE, out_dir / KEY_FILE
    ca_path.write_bytes(bundle.ca_pem)
    cert_path.write_bytes(bundle.cert_pem)
    descriptor = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as key_file:
        key_file.write(bundle.key_pem)
    os.chmod(key_path, 0o600)
    return ca_path, cert_path, key_path


def not_after(cert_pem: bytes) -> float:
    """Expiry of the first certificate in a PEM file, as Unix seconds."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    return cert.not_valid_after_utc.timestamp()
