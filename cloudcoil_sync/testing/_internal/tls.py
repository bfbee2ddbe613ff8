"""Certificates for the emulator: a per-process CA and a serving certificate it signs.

The CA is generated once per process and cached; ``CertificateAuthority`` itself lives in
``cloudcoil_sync._internal.certificates`` (the ``certs`` command uses it too).
"""

from __future__ import annotations

import os
import ssl
import tempfile
import threading

from cloudcoil_sync._internal.certificates import CertificateAuthority, ServingCert

__all__ = ["CertificateAuthority", "ServingCert", "default_ca", "server_context"]


_default_lock = threading.Lock()
_default: CertificateAuthority | None = None


def default_ca() -> CertificateAuthority:
    """The process-wide CA (generated on first use)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = CertificateAuthority()
        return _default


def server_context(serving: ServingCert) -> ssl.SSLContext:
    """A TLS >= 1.2 server context loaded with ``serving``."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    # load_cert_chain only reads files; the files live only for this call.
    with tempfile.TemporaryDirectory() as tmp:
        cert_path = os.path.join(tmp, "tls.crt")
        key_path = os.path.join(tmp, "tls.key")
        with open(cert_path, "wb") as f:
            f.write(serving.cert_pem)
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(serving.key_pem)
        ctx.load_cert_chain(cert_path, key_path)
    return ctx
