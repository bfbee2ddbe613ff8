"""The admission listener's TLS settings: its serving pair, and the CA its clients' certificates
must chain to when client certificates are verified (controller-runtime's ClientCAName).

Serving certificates are reloaded when their files change (cert-manager rotation): new
connections use the new pair, established ones keep theirs, a bad new pair is logged and the
previous one kept.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
import time

__all__ = ["CertificateStore", "load_server_context"]

log = logging.getLogger("cloudcoil_sync.admission.tls")


def load_server_context(
    certfile: str, keyfile: str, client_ca_file: str | None = None
) -> ssl.SSLContext:
    """A TLS 1.2+ server context for the pair; ValueError naming the problem otherwise.

    With `client_ca_file`, clients are asked for a certificate and one that does not chain to
    those CAs fails the handshake; a client that sends none gets through the handshake (the
    kubelet's probes have none) and the HTTP layer decides (`TLSStream.client_verified`).
    """
    for path in (certfile, keyfile, *([client_ca_file] if client_ca_file else [])):
        if not os.path.isfile(path):
            raise ValueError(f"Webhook TLS file does not exist: {path}")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    # A client's TCP half-close (no close_notify) must not poison the session: its answer
    # still has to be written.
    context.options |= ssl.OP_IGNORE_UNEXPECTED_EOF
    try:
        context.load_cert_chain(certfile, keyfile)
    except ssl.SSLError as error:
        raise ValueError(
            f"Webhook TLS certificate {certfile} and key {keyfile} cannot be used together: "
            f"{error.reason or error}"
        ) from None
    except OSError as error:
        raise ValueError(f"Webhook TLS files cannot be read: {error}") from None
    if client_ca_file:
        try:
            context.load_verify_locations(cafile=client_ca_file)
        except (ssl.SSLError, OSError) as error:
            raise ValueError(
                f"Webhook client CA file {client_ca_file} holds no usable CA certificate: {error}"
            ) from None
        context.verify_mode = ssl.CERT_OPTIONAL
    return context


def _signature(path: str) -> tuple[int, int, int, int]:
    # stat follows symlinks: a Secret volume's atomic `..data` swap changes the inode.
    try:
        st = os.stat(path)
    except OSError:
        return (0, 0, 0, 0)
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


class CertificateStore:
    """The current server SSLContext, rebuilt when the certificate, key or client CA file
    changes.

    Files are checked at most every `check_interval` seconds, from whichever connection
    thread asks first; others keep using the current context meanwhile.
    """

    def __init__(
        self,
        certfile: str,
        keyfile: str,
        *,
        check_interval: float = 2.0,
        client_ca_file: str | None = None,
    ) -> None:
        self.certfile = certfile
        self.keyfile = keyfile
        self.client_ca_file = client_ca_file
        self.check_interval = check_interval
        self._signatures = self._current()
        self._context = load_server_context(certfile, keyfile, client_ca_file)
        self._checked = time.monotonic()
        self._lock = threading.Lock()
        self.reloads = 0

    def context(self) -> ssl.SSLContext:
        """The context for a new connection, reloading first when the files changed."""
        if time.monotonic() - self._checked >= self.check_interval and self._lock.acquire(
            blocking=False
        ):
            try:
                self._checked = time.monotonic()
                self._maybe_reload()
            finally:
                self._lock.release()
        return self._context

    def _current(self) -> tuple[tuple[int, int, int, int], ...]:
        extra = [self.client_ca_file] if self.client_ca_file else []
        return tuple(_signature(path) for path in [self.certfile, self.keyfile, *extra])

    def _maybe_reload(self) -> None:
        signatures = self._current()
        if signatures == self._signatures:
            return
        # Record before loading: a bad pair is reported once, retried only when files change.
        self._signatures = signatures
        try:
            self._context = load_server_context(self.certfile, self.keyfile, self.client_ca_file)
        except ValueError as error:
            log.error("Keeping the previous webhook TLS certificate: %s", error)
            return
        self.reloads += 1
        log.info("Reloaded webhook TLS certificate from %s", self.certfile)
