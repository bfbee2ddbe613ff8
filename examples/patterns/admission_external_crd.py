"""Admission on another operator's CRD, without installing or owning that CRD.

cert-manager defines ``Certificate`` (``cert-manager.io/v1``). This policy only needs a model
of the fields it reads: a plain ``Resource`` subclass (no ``@custom_resource``, so no CRD is
generated; ``extra="allow"`` keeps every field it does not declare) and ``resource=`` /
``scope=`` on the route, since the offline REST table does not know the kind. The validator
allows DNS names under ``ALLOWED_SUFFIX`` only. Install it after cert-manager's CRDs.

    python examples/patterns/admission_external_crd.py manifests --ca-file ca.crt
"""

from __future__ import annotations

from typing import Literal

from cloudcoil.pydantic import BaseModel
from cloudcoil.resources import Resource
from pydantic import ConfigDict, Field

from cloudcoil_sync.admission import AdmissionDenied, AdmissionRequest
from cloudcoil_sync.application import Application, WebhookServer

__all__ = ["ALLOWED_SUFFIX", "Certificate", "app"]

ALLOWED_SUFFIX = ".example.com"


class CertificateSpec(BaseModel):
    model_config = ConfigDict(extra="allow")

    secret_name: str = Field(alias="secretName")
    dns_names: list[str] = Field(default_factory=list, alias="dnsNames")


class Certificate(Resource):
    """The fields of cert-manager's Certificate this policy reads."""

    model_config = ConfigDict(extra="allow")

    api_version: Literal["cert-manager.io/v1"] = Field(
        default="cert-manager.io/v1", alias="apiVersion"
    )
    kind: Literal["Certificate"] = "Certificate"
    spec: CertificateSpec


app = Application("cert-policy", webhook=WebhookServer(tls_secret="cert-policy-tls"))


@app.validate(Certificate, resource="certificates", scope="Namespaced")
def allowed_domains(request: AdmissionRequest[Certificate]) -> None:
    certificate = request.resource
    if certificate is None:
        return
    outside = [n for n in certificate.spec.dns_names if not n.endswith(ALLOWED_SUFFIX)]
    if outside:
        raise AdmissionDenied(f"DNS names outside {ALLOWED_SUFFIX}: {', '.join(outside)}")


if __name__ == "__main__":
    app.main()
