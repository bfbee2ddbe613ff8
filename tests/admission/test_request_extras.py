"""Issue 43: admission warnings in the answer, the request's headers and the caller's verified
TLS client certificate, over real TLS through the webhook host."""

from __future__ import annotations

import http.client
import json
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.admission import AdmissionDenied, AdmissionRequest, ClientCertificate
from cloudcoil_sync.admission._internal.routes import AdmissionRoutes
from cloudcoil_sync.admission._internal.server import WebhookHost
from cloudcoil_sync.admission._internal.webhook import AdmissionWebhook
from cloudcoil_sync.testing._internal.tls import CertificateAuthority

from .certs import CertificateAuthority as ServingAuthority
from .reviews import config_map, review

Factory = Callable[..., WebhookHost]


@pytest.fixture
def seen() -> list[AdmissionRequest[Any]]:
    return []


@pytest.fixture
def webhook(seen: list[AdmissionRequest[Any]]) -> Iterator[AdmissionWebhook]:
    table = AdmissionRoutes()

    @table.validating(ConfigMap, path="/validate")
    def validate(request: AdmissionRequest[ConfigMap]) -> None:
        seen.append(request)
        request.warn("spec.size is deprecated;\n  use spec.replicas")
        if ((request.resource and request.resource.data) or {}).get("deny"):
            raise AdmissionDenied("no", warnings=["x" * 300])

    @table.mutating(ConfigMap, path="/mutate")
    def mutate(request: AdmissionRequest[ConfigMap]) -> ConfigMap:
        assert request.resource is not None
        request.warn("defaulted data.mode")
        request.resource.data = {**(request.resource.data or {}), "mode": "auto"}
        return request.resource

    app = AdmissionWebhook(table, max_workers=2)
    yield app
    assert app.close(timeout=5)


def _post(
    host: WebhookHost, context: ssl.SSLContext, path: str, body: dict[str, Any]
) -> dict[str, Any]:
    connection = http.client.HTTPSConnection(*host.address, context=context, timeout=5)
    try:
        payload = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "traceparent": "00-abc-def-01"}
        connection.request("POST", path, body=payload, headers=headers)
        response = connection.getresponse()
        assert response.status == 200
        document: dict[str, Any] = json.loads(response.read())["response"]
        return document
    finally:
        connection.close()


def _context(authority: ServingAuthority, tmp_path: Path, issuer: CertificateAuthority) -> Any:
    context = ssl.create_default_context(cadata=authority.pem.decode())
    client = issuer.issue_client("kube-apiserver")
    cert, key = tmp_path / "client.crt", tmp_path / "client.key"
    cert.write_bytes(client.cert_pem)
    key.write_bytes(client.key_pem)
    context.load_cert_chain(str(cert), str(key))
    return context


@pytest.fixture
def verified(
    host_factory: Factory, webhook: AdmissionWebhook, authority: ServingAuthority, tmp_path: Path
) -> tuple[WebhookHost, ssl.SSLContext]:
    issuer = CertificateAuthority("api-server-client-ca")
    ca_file = tmp_path / "client-ca.crt"
    ca_file.write_bytes(issuer.cert_pem)
    host = host_factory(webhook, client_ca_file=str(ca_file))
    return host, _context(authority, tmp_path, issuer)


def test_handlers_see_headers_and_the_callers_certificate_and_send_warnings(
    verified: tuple[WebhookHost, ssl.SSLContext], seen: list[AdmissionRequest[Any]]
) -> None:
    host, context = verified
    answer = _post(host, context, "/validate", review())
    assert answer["allowed"] is True
    assert answer["warnings"] == ["spec.size is deprecated; use spec.replicas"]
    [request] = seen
    assert request.headers["traceparent"] == "00-abc-def-01"
    assert request.headers["content-type"] == "application/json"
    certificate = request.client_certificate
    assert isinstance(certificate, ClientCertificate)
    assert certificate.common_name == "kube-apiserver"
    assert certificate.issuer.get("commonName") == "api-server-client-ca"


def test_a_denial_carries_the_requests_and_the_denials_warnings(
    verified: tuple[WebhookHost, ssl.SSLContext],
) -> None:
    host, context = verified
    answer = _post(host, context, "/validate", review(obj=config_map(data={"deny": "1"})))
    assert answer["allowed"] is False and answer["status"]["message"] == "no"
    first, second = answer["warnings"]
    assert first.startswith("spec.size is deprecated")
    assert len(second) == 256 and second.endswith("...")


def test_a_mutation_sends_its_patch_and_its_warnings(
    verified: tuple[WebhookHost, ssl.SSLContext],
) -> None:
    host, context = verified
    answer = _post(host, context, "/mutate", review())
    assert answer["allowed"] is True and answer["patchType"] == "JSONPatch"
    assert answer["warnings"] == ["defaulted data.mode"]


def test_without_a_client_ca_there_is_no_certificate(
    host_factory: Factory,
    webhook: AdmissionWebhook,
    authority: ServingAuthority,
    seen: list[AdmissionRequest[Any]],
) -> None:
    host = host_factory(webhook)
    context = ssl.create_default_context(cadata=authority.pem.decode())
    assert _post(host, context, "/validate", review())["allowed"] is True
    assert seen[0].client_certificate is None


def test_warnings_must_be_text() -> None:
    request: AdmissionRequest[Any] = AdmissionRequest(uid="u", operation="CREATE", resource=None)
    with pytest.raises(ValueError, match="non-empty string"):
        request.warn("  ")
    with pytest.raises(TypeError, match="not one string"):
        AdmissionDenied("no", warnings="one")  # type: ignore[arg-type]
    for _ in range(40):
        request.warn("again")
    assert len(request.warnings) == 32
