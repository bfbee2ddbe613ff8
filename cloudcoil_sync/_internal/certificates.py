"""Development certificates: a self-signed CA and the certificates it issues.

The ``certs`` command writes a CA and a webhook serving certificate from here for running an
operator outside a Pod; the emulator (``cloudcoil_sync.testing``) serves its HTTPS with them.
EC P-256 keys keep generation fast. For development and tests only: in a cluster use
cert-manager or your own CA.
"""

from __future__ import annotations

import datetime
import ipaddress
import threading
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertificateAuthority", "ServingCert"]


@dataclass(frozen=True)
class ServingCert:
    """A certificate (server or client) and its private key, PEM."""

    cert_pem: bytes
    key_pem: bytes
    serial: int = 0


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


_CA_USAGE = x509.KeyUsage(
    digital_signature=True,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    key_cert_sign=True,
    crl_sign=True,
    encipher_only=False,
    decipher_only=False,
)


class CertificateAuthority:
    """A self-signed CA that issues serving certificates for loopback names (and client
    certificates, for tests of client-certificate authentication)."""

    def __init__(
        self,
        common_name: str = "cloudcoil-sync-emulator-ca",
        *,
        pem: tuple[bytes, bytes] | None = None,
    ) -> None:
        """A new CA, or with ``pem`` (certificate, private key) the CA saved from ``cert_pem``
        and ``key_pem`` earlier."""
        if pem:
            self._load(*pem)
        else:
            self._generate(common_name)
        self.cert_pem = self._cert.public_bytes(serialization.Encoding.PEM)
        self.key_pem = _key_pem(self._key)
        self._lock = threading.Lock()
        self._serving: dict[tuple[str, ...], ServingCert] = {}

    def _load(self, cert_pem: bytes, key_pem: bytes) -> None:
        key = serialization.load_pem_private_key(key_pem, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError("the CA key must be an EC private key")
        self._key = key
        self._cert = x509.load_pem_x509_certificate(cert_pem)
        self._name = self._cert.subject

    def _generate(self, common_name: str) -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        public = self._key.public_key()
        self._name = _name(common_name)
        now = datetime.datetime.now(datetime.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(self._name)
            .issuer_name(self._name)
            .public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(_CA_USAGE, critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
            .sign(self._key, hashes.SHA256())
        )

    def issue(
        self, hosts: tuple[str, ...] = ("127.0.0.1", "localhost"), *, cache: bool = True
    ) -> ServingCert:
        """A serving certificate for ``hosts`` (IPs or DNS names), cached per host set unless
        ``cache`` is False (a new key and serial, as after a rotation)."""
        with self._lock:
            cached = self._serving.get(hosts) if cache else None
            if cached is not None:
                return cached
            sans: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    sans.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    sans.append(x509.DNSName(host))
            serving = self._sign(hosts[0], ExtendedKeyUsageOID.SERVER_AUTH, sans)
            if cache:
                self._serving[hosts] = serving
            return serving

    def issue_client(self, common_name: str) -> ServingCert:
        """A client certificate for ``common_name`` (the user name the API server sees)."""
        return self._sign(common_name, ExtendedKeyUsageOID.CLIENT_AUTH, None)

    def _sign(
        self,
        common_name: str,
        usage: x509.ObjectIdentifier,
        sans: list[x509.GeneralName] | None,
    ) -> ServingCert:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        serial = x509.random_serial_number()
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(self._name)
            .public_key(key.public_key())
            .serial_number(serial)
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                critical=False,
            )
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if sans is not None:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return ServingCert(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key), serial)
