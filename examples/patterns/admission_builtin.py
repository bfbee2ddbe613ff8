"""Admission on built-in kinds: policies for Deployments, including ``deployments/scale``.

An admission-only Application (no CRD, no controller): ``@app.mutate(Deployment)`` stamps the
creating user, ``@app.validate(Deployment)`` requires a ``team`` label, a DELETE validator
protects Deployments labelled ``example.com/protected=true``, and a validator on the ``scale``
subresource (``Scale`` objects, ``target=Deployment``) bounds ``kubectl scale``. The built-in
REST table gives plurals and scopes offline; registrations match the operator namespace.

    python examples/patterns/admission_builtin.py manifests --ca-file ca.crt
"""

from __future__ import annotations

from cloudcoil.models.kubernetes.apps.v1 import Deployment
from cloudcoil.models.kubernetes.autoscaling.v1 import Scale

from cloudcoil_sync.admission import AdmissionDenied, AdmissionRequest
from cloudcoil_sync.application import Application, WebhookServer

__all__ = ["CREATED_BY", "MAX_REPLICAS", "PROTECTED", "app"]

CREATED_BY = "example.com/created-by"
PROTECTED = "example.com/protected"
MAX_REPLICAS = 20

app = Application("guard", webhook=WebhookServer(tls_secret="guard-tls"))


@app.mutate(Deployment, operations=("CREATE",))
def stamp_creator(request: AdmissionRequest[Deployment]) -> Deployment | None:
    deployment = request.resource
    if deployment is None or deployment.metadata is None:
        return None
    user = request.user_info.username.replace(":", ".")[-63:].strip("-.") or "unknown"
    annotations = deployment.metadata.annotations or {}
    deployment.metadata.annotations = {CREATED_BY: user, **annotations}
    return deployment


@app.validate(Deployment)
def require_team(request: AdmissionRequest[Deployment]) -> None:
    deployment = request.resource
    labels = (deployment.metadata.labels if deployment and deployment.metadata else None) or {}
    if not labels.get("team"):
        raise AdmissionDenied("Deployments need a team label")


@app.validate(Deployment, operations=("DELETE",))
def protect(request: AdmissionRequest[Deployment]) -> None:
    old = request.old_resource  # DELETE: the object being deleted; request.resource is None
    labels = (old.metadata.labels if old and old.metadata else None) or {}
    if labels.get(PROTECTED) == "true":
        raise AdmissionDenied(f"{request.name} is protected; remove the {PROTECTED} label first")


@app.validate(Scale, target=Deployment, subresource="scale", operations=("UPDATE",))
def limit_scale(request: AdmissionRequest[Scale]) -> None:
    scale = request.resource
    replicas = (scale.spec.replicas if scale and scale.spec else None) or 0
    if replicas > MAX_REPLICAS:
        raise AdmissionDenied(f"at most {MAX_REPLICAS} replicas, not {replicas}")


if __name__ == "__main__":
    app.main()
