"""A running Application's user metrics (on the operator's /metrics) and named checks."""

from __future__ import annotations

import http.client
import threading

from prometheus_client import Counter
from prometheus_client.parser import text_string_to_metric_families

from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import HealthServer

from .apps import settings_app
from .conftest import StartApp, wait_until
from .test_endpoints import get


def test_user_metrics_and_checks_are_served_with_the_operators(
    kube_config: Config, running: StartApp
) -> None:
    health = HealthServer(port=0)
    app = settings_app(config=kube_config, health=health)
    widgets_made = Counter("myop_widgets_made_total", "Widgets made", registry=app.registry)
    widgets_made.inc(3)
    upstream = threading.Event()
    upstream.set()

    @app.health_check(period=0)
    def upstream_api() -> bool:
        return upstream.is_set()

    running(app)
    app.wait_ready(timeout=15)
    assert health.address is not None
    host, port = health.address

    def probe(path: str) -> tuple[int, str]:
        return get(http.client.HTTPConnection(host, port, timeout=5), path)

    status, text = probe("/metrics")
    families = {family.name: family for family in text_string_to_metric_families(text)}
    assert status == 200 and "workqueue_depth" in families
    assert families["myop_widgets_made"].samples[0].value == 3.0
    status, text = probe("/readyz?verbose")
    assert status == 200
    assert text == (
        "[+]ping ok\n[+]controllers ok\n[+]upstream-api ok\n[+]informer-sync ok\n"
        "readyz check passed\n"
    )
    upstream.clear()
    assert wait_until(lambda: probe("/readyz")[0] == 503)
    assert probe("/readyz/upstream-api")[0] == 503
    assert probe("/healthz")[0] == 200  # a readiness check


def test_a_user_metric_named_like_the_frameworks_is_refused(
    kube_config: Config, running: StartApp
) -> None:
    app = settings_app(config=kube_config)
    Counter(
        "workqueue_adds", "Clashes with client-go's workqueue_adds_total", registry=app.registry
    )
    run = running(app)
    assert run.done.wait(15)
    error = run.error
    assert isinstance(error, ValueError) and "workqueue_adds" in str(error)
