"""kopf's walkthrough operator (EphemeralVolumeClaim), ported handler for handler.

The kopf original (docs/walkthrough: creation, updates, diffs):

    @kopf.on.create('ephemeralvolumeclaims')
    def create_fn(spec, name, namespace, logger, **kwargs):
        size = spec.get('size')
        if not size:
            raise kopf.PermanentError(f"Size must be set. Got {size!r}.")
        data = yaml.safe_load(PVC_TEMPLATE.format(name=name, size=size))
        kopf.adopt(data)
        obj = kubernetes.client.CoreV1Api().create_namespaced_persistent_volume_claim(...)
        return {'pvc-name': obj.metadata.name}

    @kopf.on.field('ephemeralvolumeclaims', field='spec.size')
    def update_fn(old, new, status, namespace, logger, **kwargs):
        if not new:
            raise kopf.PermanentError(f"Size must be set. Got {new!r}.")
        patch = {'spec': {'resources': {'requests': {'storage': new}}}}
        CoreV1Api().patch_namespaced_persistent_volume_claim(status['create_fn']['pvc-name'], ...)

    @kopf.on.field('ephemeralvolumeclaims', field='metadata.labels')
    def relabel(diff, status, namespace, **kwargs):
        labels_patch = {field[0]: new for op, field, old, new in diff}
        ...patch the PVC's labels...

What changed: `ctx.ensure(pvc)` adopts, creates or patches the child (kopf.adopt + create +
patch); the handler's return value becomes an explicit `ctx.set_status(pvc_name=...)`;
`kopf.PermanentError` is `TerminalError`. The PVC is deleted with its owner by Kubernetes'
garbage collector, as in kopf.

    python examples/kopf_ports/ephemeral_volume_claims.py manifests
"""

from __future__ import annotations

from typing import Literal

from cloudcoil.apimachinery import ObjectMeta
from cloudcoil.models.kubernetes.core.v1 import (
    PersistentVolumeClaim,
    PersistentVolumeClaimSpec,
    VolumeResourceRequirements,
)
from cloudcoil.pydantic import BaseModel
from cloudcoil.resources import Resource
from pydantic import ConfigDict, Field

from cloudcoil_sync.application import Application
from cloudcoil_sync.controller import Context, TerminalError
from cloudcoil_sync.crd import custom_resource

__all__ = ["EphemeralVolumeClaim", "app", "claims"]


class ClaimSpec(BaseModel):
    size: str | None = None


class ClaimStatus(BaseModel):
    model_config = ConfigDict(extra="allow")
    pvc_name: str | None = Field(default=None, alias="pvcName")


@custom_resource(api_version="kopf.dev/v1", plural="ephemeralvolumeclaims")
class EphemeralVolumeClaim(Resource):
    api_version: Literal["kopf.dev/v1"] = Field(default="kopf.dev/v1", alias="apiVersion")
    kind: Literal["EphemeralVolumeClaim"] = "EphemeralVolumeClaim"
    spec: ClaimSpec = Field(default_factory=ClaimSpec)
    status: ClaimStatus | None = None


app = Application("evc")
claims = app.controller(EphemeralVolumeClaim, owns=[PersistentVolumeClaim])


def pvc(claim: EphemeralVolumeClaim, size: str | None) -> PersistentVolumeClaim:
    if not size:
        raise TerminalError(f"Size must be set. Got {size!r}.")
    labels = claim.metadata.labels if claim.metadata else None
    return PersistentVolumeClaim(
        metadata=ObjectMeta(name=claim.name, labels=labels),
        spec=PersistentVolumeClaimSpec(
            access_modes=["ReadWriteOnce"],
            storage_class_name="standard",
            resources=VolumeResourceRequirements(requests={"storage": size}),
        ),
    )


@claims.on_create()
def create_fn(claim: EphemeralVolumeClaim, ctx: Context[EphemeralVolumeClaim]) -> None:
    created = ctx.ensure(pvc(claim, claim.spec.size))
    ctx.set_status(pvc_name=created.name)


@claims.on_field("spec.size")
def update_fn(claim: EphemeralVolumeClaim, ctx: Context[EphemeralVolumeClaim]) -> None:
    if ctx.old is None:
        return  # the creation: create_fn made the claim with this size
    ctx.ensure(pvc(claim, ctx.new))


@claims.on_field("metadata.labels")
def relabel(claim: EphemeralVolumeClaim, ctx: Context[EphemeralVolumeClaim]) -> None:
    ctx.ensure(pvc(claim, claim.spec.size))  # the PVC's labels follow the claim's


if __name__ == "__main__":
    app.main()
