"""Test certificates: a CA, a server certificate for 127.0.0.1/localhost, a client certificate
(issued by the emulator's `CertificateAuthority`), and an unrelated CA."""

from __future__ import annotations

from dataclasses import dataclass

from cloudcoil_sync.testing._internal.tls import CertificateAuthority, ServingCert

Pair = ServingCert


@dataclass(frozen=True)
class PKI:
    ca: Pair
    server: Pair
    client: Pair
    other_ca: Pair


def _own(ca: CertificateAuthority) -> Pair:
    return Pair(ca.cert_pem, ca.key_pem)


def make_pki() -> PKI:
    ca, other = CertificateAuthority("test-ca"), CertificateAuthority("other-ca")
    return PKI(
        ca=_own(ca),
        server=ca.issue(("127.0.0.1", "localhost")),
        client=ca.issue_client("test-user"),
        other_ca=_own(other),
    )
