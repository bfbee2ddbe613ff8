"""prometheus_client internals: the collector already registered under a name."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from prometheus_client.registry import Collector

from cloudcoil_sync._compat import changed

__all__ = ["check", "registered"]

_USE = "to share a metric another part of the operator already registered (leader gauge)"


def registered(registry: CollectorRegistry, name: str) -> Collector | None:
    """The collector `registry` holds under metric `name`: the registry offers no public lookup."""
    names = getattr(registry, "_names_to_collectors", None)
    if not isinstance(names, dict):
        raise changed("prometheus_client", "CollectorRegistry._names_to_collectors", _USE)
    collector: Collector | None = names.get(name)
    return collector


def check() -> None:
    """Raise `DependencyChanged` unless `registered` finds a gauge just registered."""
    from prometheus_client import Gauge

    registry = CollectorRegistry()
    gauge = Gauge("cloudcoil_compat_probe", "probe", registry=registry)
    if registered(registry, "cloudcoil_compat_probe") is not gauge:
        raise changed("prometheus_client", "CollectorRegistry._names_to_collectors by name", _USE)
