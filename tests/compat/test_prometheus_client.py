"""cloudcoil_sync._compat.prometheus_client against the installed prometheus_client."""

from __future__ import annotations

from importlib.metadata import version
from typing import cast

import pytest
from prometheus_client import CollectorRegistry, Gauge

from cloudcoil_sync._compat import DependencyChanged
from cloudcoil_sync._compat.prometheus_client import check, registered


def test_the_collector_registered_under_a_name() -> None:
    check()
    registry = CollectorRegistry()
    gauge = Gauge("widgets_total", "Widgets.", registry=registry)
    assert registered(registry, "widgets_total") is gauge
    assert registered(registry, "gadgets_total") is None


def test_a_registry_without_the_name_index_is_named() -> None:
    with pytest.raises(DependencyChanged) as changed:
        registered(cast(CollectorRegistry, object()), "widgets_total")
    assert str(changed.value).startswith(
        f"prometheus_client {version('prometheus_client')} no longer offers "
        "CollectorRegistry._names_to_collectors, which cloudcoil_sync uses to share a metric"
    )
