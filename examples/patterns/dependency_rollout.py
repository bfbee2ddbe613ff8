"""Shared dependencies: restart a Deployment's Pods when a ConfigMap it uses changes.

Deployments labelled ``example.com/reload=true`` name their ConfigMap in the annotation
``example.com/config``. A watch on ConfigMaps maps a change to every Deployment that uses it
(found in the controller's cache), and the reconciler writes a digest of the ConfigMap's data
into the pod template, so a changed ConfigMap rolls the Deployment. Many Deployments may share
one ConfigMap; none owns it. ``reloader()`` builds the controller as a reusable group that any
Application can ``include`` (see multiple_controllers.py).

    python examples/patterns/dependency_rollout.py manifests
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator

from cloudcoil.models.kubernetes.apps.v1 import Deployment
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.application import Application
from cloudcoil_sync.controller import Context, Controller, ResourceKey

__all__ = ["CONFIG", "DIGEST", "app", "digest", "reloader"]

CONFIG = "example.com/config"
DIGEST = "example.com/config-digest"


def digest(config: ConfigMap | None) -> str:
    data = (config.data or {}) if config is not None else {}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def reloader() -> Controller[Deployment]:
    """The reloader as a group: a Controller defined without an Application."""
    workloads = Controller(Deployment, label_selector="example.com/reload=true")

    @workloads.watch(ConfigMap)
    def users_of(config: ConfigMap) -> Iterator[ResourceKey]:
        name = config.metadata.name if config.metadata else None
        namespace = config.metadata.namespace if config.metadata else None
        for deployment in workloads.cached(Deployment).list(namespace=namespace):
            annotations = (deployment.metadata.annotations if deployment.metadata else None) or {}
            if annotations.get(CONFIG) == name:
                yield ResourceKey(deployment.name or "", namespace)

    @workloads.reconcile()
    def roll(deployment: Deployment, ctx: Context[Deployment]) -> Deployment | None:
        annotations = (deployment.metadata.annotations if deployment.metadata else None) or {}
        name = annotations.get(CONFIG)
        spec = deployment.spec
        if name is None or spec is None or spec.template.metadata is None:
            return None
        template = spec.template.metadata
        wanted = digest(ctx.cached(ConfigMap).get(name))
        if (template.annotations or {}).get(DIGEST) == wanted:
            return None
        template.annotations = {**(template.annotations or {}), DIGEST: wanted}
        return deployment  # persisted as one guarded JSON patch

    return workloads


app = Application("reloader")
app.include(reloader())

if __name__ == "__main__":
    app.main()
