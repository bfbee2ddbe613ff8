"""kopf's event-watching and deletion-notice operator, ported: an audit trail of ConfigMaps.

The kopf original:

    @kopf.on.event('configmaps', labels={'audit': 'yes'})
    def audit(event, logger, **_):
        TRAIL.append((event['type'], event['object']['metadata']['name']))

    @kopf.on.update('configmaps', labels={'audit': 'yes'}, field='data')
    def changed(old, new, diff, name, **_):
        CHANGES.append((name, sorted(field[-1] for op, field, o, n in diff)))

    @kopf.on.delete('configmaps', labels={'audit': 'yes'}, optional=True)
    def gone(name, body, **_):
        GONE.append((name, dict(body.get('data', {}))))

Here: `@controller.on_event()` gets each `RawEvent` (type, object, old) on the informer's
thread, its errors logged and never fatal; `on_field("data")` the old and new data with
the diff; `on_delete(requires_finalizer=False)` the last object seen, once, without holding
deletion (kopf's `optional=True`). kopf's `labels=` filter is the controller's
`label_selector`. No reconcile function is needed.

    python examples/kopf_ports/config_audit.py manifests
"""

from __future__ import annotations

import threading
from typing import TypeVar

from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.application import Application
from cloudcoil_sync.controller import Context, RawEvent

__all__ = ["AUDIT", "Audit", "app", "configs"]

T = TypeVar("T")


class Audit:
    """The trails, shared with whoever reads them (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.trail: list[tuple[str, str]] = []
        self.changes: list[tuple[str, list[str]]] = []
        self.gone: list[tuple[str, dict[str, str]]] = []

    def add(self, into: list[T], item: T) -> None:
        with self.lock:
            into.append(item)
            self.lock.notify_all()


AUDIT = Audit()
app = Application("config-audit")
configs = app.controller(ConfigMap, label_selector="audit=yes", all_namespaces=True)


@configs.on_event()
def audit(event: RawEvent) -> None:
    AUDIT.add(AUDIT.trail, (event.type, event.raw["metadata"]["name"]))


@configs.on_field("data")
def changed(config: ConfigMap, ctx: Context[ConfigMap]) -> None:
    if ctx.old is not None:  # an update (on creation the data appears from None)
        keys = sorted(change.path.split(".", 1)[1] for change in ctx.diff)
        AUDIT.add(AUDIT.changes, ((config.name or ""), keys))


@configs.on_delete(requires_finalizer=False)
def gone(config: ConfigMap) -> None:
    AUDIT.add(AUDIT.gone, ((config.name or ""), dict(config.data or {})))


if __name__ == "__main__":
    app.main()
