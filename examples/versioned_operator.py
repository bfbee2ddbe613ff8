"""A Gizmo API that moved from ``v1alpha1`` to ``v1``: two versions of one kind, converted.

``v1alpha1`` (served, deprecated) had ``spec.greeting``; ``v1`` (the hub and the storage
version) renamed it to ``spec.message`` and added ``spec.replicas``. Users of either version
keep working: the API server stores ``v1`` and calls the operator's conversion webhook
(``/convert/gizmos.examples.cloudcoil.dev``, served by the same ``WebhookServer`` as
admission) to give every client the version it asks for. ``spec.replicas`` has no place in
``v1alpha1``: it survives a round trip through it in the ``conversion.cloudcoil.io/hub``
annotation. The controller reconciles ``v1``, whatever version the object was written in.

::

    python examples/versioned_operator.py manifests --image example/gizmos:v1 --ca-file ca.crt
    python examples/versioned_operator.py install --image example/gizmos:v1 --ca-file ca.crt
    python examples/versioned_operator.py migrate     # then storedVersions = [v1]
"""

from __future__ import annotations

from typing import Annotated, Literal

from cloudcoil.pydantic import BaseModel
from cloudcoil.resources import Resource
from pydantic import Field

from cloudcoil_sync.application import Application, WebhookServer
from cloudcoil_sync.controller import Context, ReconcileStatus
from cloudcoil_sync.crd import PrinterColumn, Version, Versions, custom_resource

__all__ = ["GIZMOS", "Gizmo", "GizmoV1Alpha1", "app", "gizmos", "to_v1", "to_v1alpha1"]

GROUP = "examples.cloudcoil.dev"


class GizmoStatus(ReconcileStatus):
    phase: Annotated[str | None, PrinterColumn("Phase")] = None


class GizmoSpecV1Alpha1(BaseModel):
    greeting: Annotated[str, PrinterColumn("Greeting")] = "hello"


@custom_resource(api_version=f"{GROUP}/v1alpha1", kind="Gizmo", plural="gizmos")
class GizmoV1Alpha1(Resource):
    api_version: Literal["examples.cloudcoil.dev/v1alpha1"] = Field(
        default="examples.cloudcoil.dev/v1alpha1", alias="apiVersion"
    )
    kind: Literal["Gizmo"] = "Gizmo"
    spec: GizmoSpecV1Alpha1 = Field(default_factory=GizmoSpecV1Alpha1)
    status: GizmoStatus | None = None


class GizmoSpec(BaseModel):
    message: Annotated[str, PrinterColumn("Message")] = "hello"
    replicas: int = Field(default=1, ge=0, le=10)


@custom_resource(api_version=f"{GROUP}/v1", kind="Gizmo", plural="gizmos")
class Gizmo(Resource):
    api_version: Literal["examples.cloudcoil.dev/v1"] = Field(
        default="examples.cloudcoil.dev/v1", alias="apiVersion"
    )
    kind: Literal["Gizmo"] = "Gizmo"
    spec: GizmoSpec = Field(default_factory=GizmoSpec)
    status: GizmoStatus | None = None


def to_v1(old: GizmoV1Alpha1) -> Gizmo:
    """v1alpha1 -> v1 (the hub): ``greeting`` is now ``message``."""
    return Gizmo(
        metadata=old.metadata, spec=GizmoSpec(message=old.spec.greeting), status=old.status
    )


def to_v1alpha1(new: Gizmo) -> GizmoV1Alpha1:
    """v1 -> v1alpha1: ``replicas`` has no field here (kept in the stash annotation)."""
    spec = GizmoSpecV1Alpha1(greeting=new.spec.message)
    return GizmoV1Alpha1(metadata=new.metadata, spec=spec, status=new.status)


GIZMOS = Versions(
    Version(Gizmo, hub=True, storage=True),
    Version(
        GizmoV1Alpha1,
        to_hub=to_v1,
        from_hub=to_v1alpha1,
        deprecated=True,
        deprecation_warning="examples.cloudcoil.dev/v1alpha1 Gizmo is deprecated; use v1",
    ),
)

app = Application("gizmos", resources=(GIZMOS,), webhook=WebhookServer(tls_secret="gizmos-tls"))
gizmos = app.controller(Gizmo)


@gizmos.reconcile()
def reconcile(gizmo: Gizmo, ctx: Context[Gizmo]) -> None:
    """Reconciled as v1, whatever version the object was written in."""
    ctx.set_status(phase=f"Serving {gizmo.spec.replicas}x {gizmo.spec.message!r}")


if __name__ == "__main__":
    app.main()
