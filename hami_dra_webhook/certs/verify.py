"""What is wrong with a serving certificate, checked once for both users: `check` (is the
webhook's caBundle good for its certificate) and the self-managed certificates (is the stored
bundle still usable)."""

from __future__ import annotations

import datetime

from cryptography import x509
from cryptography.exceptions import InvalidSignature

EXPIRY_MARGIN = datetime.timedelta(days=30)


def issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    """`ca` signed `cert` directly."""
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def certificate_problem(
    bundle: bytes, cert_pem: bytes, now: datetime.datetime | None = None
) -> str:
    """Why the caBundle `bundle` does not make `cert_pem` a good serving certificate for 30 days
    more ("" when it does)."""
    if not bundle:
        return "the webhook configuration has no caBundle yet"
    if not cert_pem:
        return "the certificate Secret holds no tls.crt"
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        cas = x509.load_pem_x509_certificates(bundle)
    except ValueError as error:
        return f"unreadable certificate: {error}"
    if not any(issued_by(cert, ca) for ca in cas):
        return "the caBundle does not verify the serving certificate"
    left = cert.not_valid_after_utc - (now or datetime.datetime.now(datetime.UTC))
    if left < EXPIRY_MARGIN:
        return f"the serving certificate expires in {left.days} days"
    return ""
