"""Informer get/list: read watched kinds from the operator's cache, not the API server.

A ``ConfigMirror`` copies the data of a source ConfigMap into a ConfigMap it owns. The
reconciler reads the source with ``ctx.cached(ConfigMap).get(name)`` (``None`` when absent,
no request), and the dependency mapper finds the mirrors of a changed source with
``mirrors.cached(ConfigMirror).list()``. ``ctx.client(Kind)`` is the live alternative: one
API request, always current (use it for read-your-writes and kinds you do not watch).

    python examples/patterns/cached_reads.py manifests
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from cloudcoil.apimachinery import ObjectMeta
from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from cloudcoil.pydantic import BaseModel
from cloudcoil.resources import Resource
from pydantic import Field

from cloudcoil_sync.application import Application
from cloudcoil_sync.controller import Context, ReconcileStatus, ResourceKey, Wait
from cloudcoil_sync.crd import custom_resource

__all__ = ["ConfigMirror", "app", "mirrors"]


class MirrorSpec(BaseModel):
    source: str


class MirrorStatus(ReconcileStatus):
    keys: list[str] = Field(default_factory=list)


@custom_resource(api_version="patterns.cloudcoil.dev/v1", plural="configmirrors")
class ConfigMirror(Resource):
    api_version: Literal["patterns.cloudcoil.dev/v1"] = Field(
        default="patterns.cloudcoil.dev/v1", alias="apiVersion"
    )
    kind: Literal["ConfigMirror"] = "ConfigMirror"
    spec: MirrorSpec
    status: MirrorStatus | None = None


app = Application("mirrors")
mirrors = app.controller(ConfigMirror, owns=(ConfigMap,))


@mirrors.watch(ConfigMap)
def mirrors_of_source(config: ConfigMap) -> Iterator[ResourceKey]:
    """A source changed: enqueue the mirrors that name it (a cached list, no request)."""
    name = config.metadata.name if config.metadata else None
    namespace = config.metadata.namespace if config.metadata else None
    for mirror in mirrors.cached(ConfigMirror).list(namespace=namespace):
        if mirror.spec.source == name:
            yield ResourceKey(mirror.name or "", namespace)


@mirrors.reconcile()
def mirror(resource: ConfigMirror, ctx: Context[ConfigMirror]) -> None:
    source = ctx.cached(ConfigMap).get(resource.spec.source)
    if source is None:
        raise Wait("SourceMissing", f"ConfigMap {resource.spec.source} does not exist yet")
    data = dict(source.data or {})
    ctx.ensure(ConfigMap(metadata=ObjectMeta(name=f"{resource.name}-mirror"), data=data))
    ctx.set_status(keys=sorted(data))


if __name__ == "__main__":
    app.main()
