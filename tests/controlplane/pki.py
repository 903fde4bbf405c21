"""The control plane's certificates: one CA, the apiserver's serving certificate, client
certificates for the admin and the controllers, and the service-account signing key."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_FOR = datetime.timedelta(days=2)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


@dataclass(frozen=True)
class KeyPair:
    cert: Path
    key: Path


@dataclass
class Pki:
    folder: Path

    def __post_init__(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._ca_key = _key()
        now = datetime.datetime.now(datetime.UTC)
        self._ca = (
            x509.CertificateBuilder()
            .subject_name(_name("hami-e2e-ca"))
            .issuer_name(_name("hami-e2e-ca"))
            .public_key(self._ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALID_FOR)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._ca_key, hashes.SHA256())
        )
        self.ca = self.folder / "ca.crt"
        self.ca.write_bytes(self._ca.public_bytes(serialization.Encoding.PEM))
        service_account = _key()
        self.service_account_key = self.folder / "sa.key"
        self.service_account_key.write_bytes(_key_pem(service_account))
        self.service_account_pub = self.folder / "sa.pub"
        self.service_account_pub.write_bytes(
            service_account.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )

    def issue(
        self,
        name: str,
        common_name: str,
        organization: str | None = None,
        hosts: tuple[str, ...] = (),
        expired: bool = False,
        usage: x509.ObjectIdentifier | None = None,
    ) -> KeyPair:
        """A certificate signed by the CA: a server's when `hosts` are given, else a client's
        (`usage`: another extended key usage; `expired`: valid until an hour ago)."""
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        if expired:
            now -= VALID_FOR + datetime.timedelta(hours=1)
        if usage is None:
            usage = ExtendedKeyUsageOID.SERVER_AUTH if hosts else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name, organization))
            .issuer_name(self._ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALID_FOR)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if hosts:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([_general_name(host) for host in hosts]),
                critical=False,
            )
        certificate = builder.sign(self._ca_key, hashes.SHA256())
        pair = KeyPair(self.folder / f"{name}.crt", self.folder / f"{name}.key")
        pair.cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        pair.key.write_bytes(_key_pem(key))
        pair.key.chmod(0o600)
        return pair


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)
