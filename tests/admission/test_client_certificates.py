"""Issue 37: optional verification of the API server's client certificate (controller-runtime's
ClientCAName) over real TLS: admission paths need a certificate from the client CA, a wrong one
fails the handshake, and the probes and `/metrics` (bearer tokens) stay reachable without one."""

from __future__ import annotations

import http.client
import ssl
from collections.abc import Callable
from pathlib import Path

import pytest

from cloudcoil_sync.admission._internal.server import WebhookHost
from cloudcoil_sync.testing._internal.tls import CertificateAuthority

from .certs import CertificateAuthority as ServingAuthority

Factory = Callable[..., WebhookHost]


def _client_context(
    authority: ServingAuthority, tmp_path: Path, issuer: CertificateAuthority | None
) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=authority.pem.decode())
    if issuer is not None:
        client = issuer.issue_client("kube-apiserver")
        cert, key = tmp_path / f"client-{id(issuer)}.crt", tmp_path / f"client-{id(issuer)}.key"
        cert.write_bytes(client.cert_pem)
        key.write_bytes(client.key_pem)
        context.load_cert_chain(str(cert), str(key))
    return context


def _get(host: WebhookHost, context: ssl.SSLContext, path: str) -> tuple[int, bytes]:
    connection = http.client.HTTPSConnection(*host.address, context=context, timeout=5)
    try:
        if path == "/ok":
            connection.request("POST", path, body=b"{}")
        else:
            connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@pytest.fixture
def api_server_ca() -> CertificateAuthority:
    return CertificateAuthority("api-server-client-ca")


def _verifying_host(host_factory: Factory, tmp_path: Path, ca: CertificateAuthority) -> WebhookHost:
    ca_file = tmp_path / "client-ca.crt"
    ca_file.write_bytes(ca.cert_pem)
    return host_factory(client_ca_file=str(ca_file))


def test_the_api_servers_certificate_is_required_on_admission_paths(
    host_factory: Factory,
    authority: ServingAuthority,
    tmp_path: Path,
    api_server_ca: CertificateAuthority,
) -> None:
    host = _verifying_host(host_factory, tmp_path, api_server_ca)
    api_server = _client_context(authority, tmp_path, api_server_ca)
    assert _get(host, api_server, "/ok")[0] == 200
    anonymous = _client_context(authority, tmp_path, None)
    status, body = _get(host, anonymous, "/ok")
    assert status == 403 and b"client certificate" in body
    assert _get(host, anonymous, "/healthz") == (200, b"ok\n")  # the kubelet's probes
    assert _get(host, anonymous, "/readyz")[0] == 200


def test_a_certificate_from_another_ca_fails_the_handshake(
    host_factory: Factory,
    authority: ServingAuthority,
    tmp_path: Path,
    api_server_ca: CertificateAuthority,
) -> None:
    host = _verifying_host(host_factory, tmp_path, api_server_ca)
    impostor = _client_context(authority, tmp_path, CertificateAuthority("impostor"))
    with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)):
        _get(host, impostor, "/ok")


def test_without_a_client_ca_no_certificate_is_asked(
    host_factory: Factory, authority: ServingAuthority, tmp_path: Path
) -> None:
    host = host_factory()
    assert _get(host, _client_context(authority, tmp_path, None), "/ok")[0] == 200


def test_an_unusable_client_ca_file_is_a_clear_error(host_factory: Factory, tmp_path: Path) -> None:
    bad = tmp_path / "ca.crt"
    bad.write_text("not a certificate")
    with pytest.raises(ValueError, match=r"client CA file .* holds no usable CA certificate"):
        host_factory(client_ca_file=str(bad))
    with pytest.raises(ValueError, match="does not exist"):
        host_factory(client_ca_file=str(tmp_path / "missing.crt"))
