"""A server TLS context that picks up rotated certificate files without a restart.

Secret volumes and cert-manager rewrite tls.crt/tls.key in place. A watcher notices the change,
loads the pair into a fresh SSLContext (a pair that does not load, such as a half-written
rotation, is skipped and retried) and swaps it in; every new handshake then uses the fresh
context through the SNI callback, which runs for each ClientHello. Open connections keep theirs.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import time
from datetime import UTC, datetime
from pathlib import Path

from hami_dra_webhook.certs.pki import not_after

# TLS 1.2 cipher suites with forward secrecy and AEAD only; TLS 1.3 suites are all strong.
TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"
VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}
log = logging.getLogger("hami_dra_webhook.tls")


class KeyFileExposed(ValueError):
    """The private key file can be read or changed by users other than its owner and group."""


def check_key_permissions(key_file: Path) -> None:
    mode = os.stat(key_file).st_mode
    if mode & 0o007:
        raise KeyFileExposed(
            f"{key_file} has mode {mode & 0o777:o}: other users can read or change the private"
            " key; chmod 600 (or 640), or set defaultMode: 0440 on the Secret volume"
        )


EXPIRY_WARNING = 7 * 86400  # seconds before expiry when it is logged
_RANK = {"": 0, "soon": 1, "expired": 2}


class ReloadingTLS:
    def __init__(
        self,
        cert_file: Path,
        key_file: Path,
        min_version: str = "1.3",
        client_ca_file: Path | None = None,
    ) -> None:
        self.cert_file, self.key_file = cert_file, key_file
        # With a client CA, only callers with a certificate it signed get past the handshake
        # (kube-apiserver presents one from its admission configuration's kubeConfigFile).
        self.client_ca_file = client_ca_file
        check_key_permissions(key_file)
        self.min_version = VERSIONS[min_version]
        self._stamp = self._files_stamp()
        self._current = self._load()
        self.expires_at = not_after(cert_file.read_bytes())
        self.reloads = 0
        self._logged = ""  # "soon" or "expired": what was logged for this certificate
        self.check_expiry(time.time())
        # The context uvicorn listens with; it hands each handshake to the current one.
        self.context = self._current
        self.context.sni_callback = self._pick_context

    def _new_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = self.min_version
        context.set_ciphers(TLS12_CIPHERS)
        context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
        context.set_alpn_protocols(["http/1.1"])
        if self.client_ca_file is not None:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(self.client_ca_file)
        return context

    def _load(self) -> ssl.SSLContext:
        context = self._new_context()
        context.load_cert_chain(self.cert_file, self.key_file)
        return context

    def _pick_context(
        self, connection: ssl.SSLObject, server_name: str | None, context: ssl.SSLContext
    ) -> None:
        if self._current is not context:
            connection.context = self._current

    def _files_stamp(self) -> tuple[tuple[int, int, int], ...]:
        stamps = []
        for path in (self.cert_file, self.key_file):
            info = os.stat(path)
            stamps.append((info.st_mtime_ns, info.st_size, info.st_ino))
        return tuple(stamps)

    def reload_if_changed(self) -> bool:
        try:
            stamp = self._files_stamp()
        except OSError:
            return False  # a rotation may remove and recreate the files
        if stamp == self._stamp:
            return False
        try:
            check_key_permissions(self.key_file)
            fresh = self._load()
            expires_at = not_after(self.cert_file.read_bytes())
        except (OSError, ssl.SSLError, ValueError) as error:
            log.warning(
                "certificate files changed but do not load yet (%s); keeping the old", error
            )
            return False
        self._current, self._stamp, self.expires_at = fresh, stamp, expires_at
        self.reloads += 1
        self._logged = ""
        log.info("loaded rotated certificate %s", self.cert_file)
        self.check_expiry(time.time())
        return True

    def check_expiry(self, now: float) -> bool:
        """Log once when the certificate expires within a week and once when it has expired;
        True when expired (then /readyz fails too)."""
        left = self.expires_at - now
        state = "expired" if left <= 0 else ("soon" if left <= EXPIRY_WARNING else "")
        if _RANK[state] > _RANK[self._logged]:  # each state logged once, never again lower
            self._logged = state
            when = datetime.fromtimestamp(self.expires_at, UTC).isoformat()
            if state == "expired":
                log.error(
                    "the serving certificate %s expired at %s: kube-apiserver refuses this"
                    " webhook; rotate it", self.cert_file, when, extra={"expires": when},
                )  # fmt: skip
            else:
                log.warning(
                    "the serving certificate %s expires at %s, in %.1f days; rotate it",
                    self.cert_file, when, left / 86400, extra={"expires": when},
                )  # fmt: skip
        return state == "expired"

    async def watch(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            self.reload_if_changed()
            self.check_expiry(time.time())
