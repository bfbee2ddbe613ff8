"""The user's own prometheus-client metrics, served with the operator's on `/metrics`.

`Application.registry` is a `CollectorRegistry` the user registers metrics on (``Counter(...,
registry=app.registry)``); each run adds `UserMetrics(app.registry)` to its own registry,
so they are exposed on the same endpoint (the HealthServer's `/metrics` and the webhook
host's secured one). A user metric named like one of the framework's is refused when the
run starts (prometheus-client's duplicate check), naming the metric.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

__all__ = ["UserMetrics", "user_registry"]


def user_registry() -> CollectorRegistry:
    """A registry for the user's metrics (no `_created` series: it is scraped through the
    operator's registry, which leaves them out)."""
    return CollectorRegistry(auto_describe=True)


class UserMetrics(Collector):
    """Everything `registry` collects, at each scrape."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterator[Metric]:
        yield from self._registry.collect()

    def describe(self) -> Iterator[Metric]:
        # The families as they are now: lets the operator's registry refuse a name clash.
        yield from self._registry.collect()
