"""A freshly generated CA certificate and its private key (PEM), for tests."""

from __future__ import annotations

from cloudcoil_sync.testing._internal.tls import CertificateAuthority


def make_ca() -> tuple[bytes, bytes]:
    """(certificate PEM, private key PEM) of a new self-signed CA."""
    ca = CertificateAuthority("cloudcoil-sync test CA")
    return ca.cert_pem, ca.key_pem
