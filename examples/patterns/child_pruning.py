"""Child pruning: a variable set of owned ConfigMaps, stale ones deleted.

A ``ConfigSet`` lists entries; each becomes a ConfigMap ``<set>-<entry>`` it controls.

- ``configsets`` uses ``owns(ConfigMap, prune=True)``: after a pass that completes, controlled
  ConfigMaps the pass did not ``ctx.ensure`` are deleted (UID and resourceVersion
  preconditions), and RBAC gains ``delete`` on ConfigMaps. Nothing else to write.
- ``guarded`` (``GuardedConfigSet``) prunes by hand, for when deletion needs a decision of its
  own (here: a child annotated ``example.com/keep`` survives): it lists its children from the
  cache, checks that it is their controller, and deletes with the cached UID and
  resourceVersion as preconditions, so a child changed or replaced meanwhile is left alone
  (409) until the next pass. It declares ``RBACRule(ConfigMap, ("delete",))`` itself.

    python examples/patterns/child_pruning.py manifests
"""

from __future__ import annotations

from typing import Literal

from cloudcoil.apimachinery import ObjectMeta
from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from cloudcoil.pydantic import BaseModel
from cloudcoil.resources import Resource
from pydantic import Field

from cloudcoil_sync.application import Application, RBACRule
from cloudcoil_sync.client import Conflict, NotFound
from cloudcoil_sync.controller import Context, ReconcileStatus
from cloudcoil_sync.crd import custom_resource

__all__ = ["KEEP", "ConfigSet", "GuardedConfigSet", "app", "configsets", "guarded"]

GROUP_VERSION = "patterns.cloudcoil.dev/v1"
KEEP = "example.com/keep"


class SetSpec(BaseModel):
    entries: dict[str, str] = Field(default_factory=dict)


class SetStatus(ReconcileStatus):
    children: list[str] = Field(default_factory=list)


@custom_resource(api_version=GROUP_VERSION, plural="configsets")
class ConfigSet(Resource):
    api_version: Literal["patterns.cloudcoil.dev/v1"] = Field(
        default="patterns.cloudcoil.dev/v1", alias="apiVersion"
    )
    kind: Literal["ConfigSet"] = "ConfigSet"
    spec: SetSpec = Field(default_factory=SetSpec)
    status: SetStatus | None = None


@custom_resource(api_version=GROUP_VERSION, plural="guardedconfigsets")
class GuardedConfigSet(Resource):
    api_version: Literal["patterns.cloudcoil.dev/v1"] = Field(
        default="patterns.cloudcoil.dev/v1", alias="apiVersion"
    )
    kind: Literal["GuardedConfigSet"] = "GuardedConfigSet"
    spec: SetSpec = Field(default_factory=SetSpec)
    status: SetStatus | None = None


app = Application("configsets", rules=(RBACRule(ConfigMap, ("delete",)),))
configsets = app.controller(ConfigSet).owns(ConfigMap, prune=True)
guarded = app.controller(GuardedConfigSet, owns=(ConfigMap,))


def children(owner: Resource, entries: dict[str, str]) -> list[ConfigMap]:
    return [
        ConfigMap(metadata=ObjectMeta(name=f"{owner.name}-{key}"), data={"value": value})
        for key, value in sorted(entries.items())
    ]


@configsets.reconcile()
def ensure_entries(item: ConfigSet, ctx: Context[ConfigSet]) -> None:
    names = [ctx.ensure(child).name or "" for child in children(item, item.spec.entries)]
    ctx.set_status(children=names)  # children not ensured here are pruned after the pass


@guarded.reconcile()
def ensure_and_prune(item: GuardedConfigSet, ctx: Context[GuardedConfigSet]) -> None:
    wanted = {ctx.ensure(child).name for child in children(item, item.spec.entries)}
    uid = item.metadata.uid if item.metadata else None
    api = ctx.client(ConfigMap)
    for child in ctx.cached(ConfigMap).list():
        meta = child.metadata
        if meta is None or child.name in wanted or (meta.annotations or {}).get(KEEP):
            continue
        if not any(r.controller and r.uid == uid for r in meta.owner_references or []):
            continue  # not ours
        try:
            api.delete(child.name or "", uid=meta.uid, resource_version=meta.resource_version)
        except NotFound:
            pass  # already gone
        except Conflict:
            ctx.event("PruneSkipped", f"{child.name} changed since it was read; next pass")
    ctx.set_status(children=sorted(n for n in wanted if n))


if __name__ == "__main__":
    app.main()
