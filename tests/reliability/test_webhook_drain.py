"""A running operator's webhook server drains from the first moment of its stop: while the
manager is still stopping (a pass in flight), the listener answers every request, closing
each connection after its answer, and reports not ready but healthy."""

from __future__ import annotations

import http.client
import ssl
import threading
from collections.abc import Callable
from pathlib import Path

from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from waiting import wait_until

from cloudcoil_sync.admission import AdmissionRequest
from cloudcoil_sync.application import Application
from cloudcoil_sync.client import Config
from cloudcoil_sync.testing import Emulator

from .conftest import CONFIGMAPS, Record, Running, configmap, echo_operator
from .test_security import local_webhook


def test_the_webhook_server_drains_while_the_manager_stops(
    kube_emulator: Emulator,
    kube_config: Config,
    tmp_path: Path,
    operators: Callable[[Application], Running],
) -> None:
    entered, release = threading.Event(), threading.Event()

    def hold(cm: ConfigMap) -> None:
        if cm.name == "slow":
            entered.set()
            release.wait(20)

    app, _ = echo_operator(kube_config, Record(), hook=hold, shutdown_timeout=20)
    ca, _, app.webhook = local_webhook(tmp_path, ("reliability.default.svc", "127.0.0.1"))
    port = app.webhook.port

    @app.validate(ConfigMap)
    def allow(request: AdmissionRequest[ConfigMap]) -> None:
        return None

    running = operators(app)
    context = ssl.create_default_context(cadata=ca.cert_pem.decode())
    pooled = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    try:
        assert get(pooled, "/healthz") == (200, None)  # kept alive
        kube_config.client(CONFIGMAPS).create(configmap("slow", "v"))
        assert entered.wait(15)
        running.stop.set()  # the stop begins; the manager waits for the pass in flight
        assert wait_until(lambda: probe(port, context, "/readyz") == (503, "close"), 15)
        assert get(pooled, "/healthz") == (200, "close")  # answered in full, then closed
        assert running.thread.is_alive()  # the manager is still stopping
    finally:
        release.set()
        pooled.close()
    assert running.close() is None


def get(connection: http.client.HTTPSConnection, path: str) -> tuple[int, str | None]:
    connection.request("GET", path)
    response = connection.getresponse()
    response.read()
    return response.status, response.getheader("Connection")


def probe(port: int, context: ssl.SSLContext, path: str) -> tuple[int, str | None]:
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    try:
        return get(connection, path)
    finally:
        connection.close()
