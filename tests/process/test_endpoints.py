"""Probes of a running Application: the HealthServer (no webhook) and the webhook listener."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
from pathlib import Path

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from ports import free_port
from prometheus_client.parser import text_string_to_metric_families

from cloudcoil_sync.admission import AdmissionRequest
from cloudcoil_sync.application import Application, WebhookServer
from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import HealthServer, LeaderElection
from cloudcoil_sync.controller._internal.health import HealthServerError
from cloudcoil_sync.testing import Emulator
from cloudcoil_sync.testing._internal.tls import default_ca

from .apps import settings_app
from .conftest import LEASES, StartApp, wait_until


def get(
    connection: http.client.HTTPConnection, path: str, token: str | None = None
) -> tuple[int, str]:
    try:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def held_elsewhere(config: Config) -> LeaderElection:
    """An election this replica cannot win: the Lease is held by a live peer."""
    config.client(LEASES).create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "settings"},
            "spec": {"holderIdentity": "peer", "leaseDurationSeconds": 3600},
        }
    )
    return LeaderElection("settings", lease_duration=3, renew_deadline=2, retry_period=0.2)


def test_health_server_follows_the_manager(kube_config: Config, running: StartApp) -> None:
    health = HealthServer(port=0)
    app = settings_app(config=kube_config, health=health)
    run = running(app)
    app.wait_ready(timeout=15)
    assert health.address is not None
    host, port = health.address

    def probe(path: str) -> tuple[int, str]:
        return get(http.client.HTTPConnection(host, port, timeout=5), path)

    assert probe("/healthz") == (200, "ok\n")
    assert probe("/readyz") == (200, "ok\n")
    assert probe("/controllers/readyz") == (200, "ok\n")
    status, text = probe("/metrics")
    names = {family.name for family in text_string_to_metric_families(text)}
    assert status == 200 and {"cloudcoil_manager_ready", "workqueue_depth"} <= names
    assert run.close() is None
    with pytest.raises(OSError):
        socket.create_connection((host, port), timeout=2).close()


def test_standby_health_server_is_ready_and_reports_leadership_apart(
    kube_config: Config, running: StartApp
) -> None:
    # Issue 18, finding 5: a standby's /readyz (its readinessProbe) must be 200, or a
    # second replica or a rolling update never becomes Ready; leadership is on
    # /controllers/readyz.
    health = HealthServer(port=0)
    app = settings_app(
        config=kube_config, health=health, leader_election=held_elsewhere(kube_config)
    )
    running(app)
    assert wait_until(lambda: app.healthy and health.address is not None)
    assert not app.ready and health.address is not None
    host, port = health.address
    assert get(http.client.HTTPConnection(host, port, timeout=5), "/healthz") == (200, "ok\n")
    assert get(http.client.HTTPConnection(host, port, timeout=5), "/readyz") == (200, "ok\n")
    status, _ = get(http.client.HTTPConnection(host, port, timeout=5), "/controllers/readyz")
    assert status == 503
    status, text = get(http.client.HTTPConnection(host, port, timeout=5), "/metrics")
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    assert samples[("leader_election_master_status", (("name", "settings"),))] == 0.0
    assert samples[("cloudcoil_manager_informers", ())] == 0.0


def test_webhook_serves_on_a_standby(
    kube_emulator: Emulator, kube_config: Config, running: StartApp, tmp_path: Path
) -> None:
    serving = default_ca().issue()
    certfile, keyfile = tmp_path / "tls.crt", tmp_path / "tls.key"
    certfile.write_bytes(serving.cert_pem)
    keyfile.write_bytes(serving.key_pem)
    port = free_port()
    app = settings_app(
        config=kube_config,
        leader_election=held_elsewhere(kube_config),
        webhook=WebhookServer(
            certfile=str(certfile), keyfile=str(keyfile), host="127.0.0.1", port=port
        ),
    )

    @app.validate(ConfigMap)
    def allow(request: AdmissionRequest[ConfigMap]) -> None:
        return None

    run = running(app)
    # With a webhook, readiness is admission availability: standbys are ready too.
    app.wait_ready(timeout=15)
    assert app.healthy and not app.manager.ready and app.manager.informer_count == 0
    context = ssl.create_default_context(cadata=default_ca().cert_pem.decode())

    def probe(path: str, token: str | None = None) -> tuple[int, str]:
        return get(http.client.HTTPSConnection("127.0.0.1", port, context=context), path, token)

    assert probe("/readyz") == (200, "ok\n")
    assert probe("/healthz") == (200, "ok\n")
    assert probe("/controllers/readyz") == (503, "not ready\n")
    # Secure metrics by default: only to a token the API server authorizes.
    assert probe("/metrics") == (401, "Unauthorized\n")
    status, text = probe("/metrics", kube_emulator.admin_token)
    assert status == 200 and "leader_election_master_status" in text
    assert run.close() is None
    assert not app.ready
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_webhook_only_application(kube_config: Config, running: StartApp, tmp_path: Path) -> None:
    serving = default_ca().issue()
    certfile, keyfile = tmp_path / "tls.crt", tmp_path / "tls.key"
    certfile.write_bytes(serving.cert_pem)
    keyfile.write_bytes(serving.key_pem)
    port = free_port()
    app = Application(
        "policies",
        config=kube_config,
        webhook=WebhookServer(
            certfile=str(certfile), keyfile=str(keyfile), host="127.0.0.1", port=port
        ),
    )

    @app.validate(ConfigMap)
    def allow(request: AdmissionRequest[ConfigMap]) -> None:
        return None

    run = running(app)
    app.wait_ready(timeout=15)
    assert app.manager is None and app.healthy
    context = ssl.create_default_context(cadata=default_ca().cert_pem.decode())
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context)
    assert get(connection, "/controllers/readyz") == (503, "not ready\n")
    assert run.close() is None
    assert not kube_config.transport.closed


def test_health_bind_failure_is_fatal(kube_config: Config) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        app = settings_app(config=kube_config, health=HealthServer(port=port))
        with pytest.raises(HealthServerError, match=f"127.0.0.1:{port}"):
            app.run(stop=threading.Event())
    assert app.manager is not None and app.manager.informer_count == 0
    assert not app.healthy


def test_leader_webhook_reads_the_informer_cache_and_reports_metrics(
    kube_emulator: Emulator, kube_config: Config, running: StartApp, tmp_path: Path
) -> None:
    serving = default_ca().issue()
    certfile, keyfile = tmp_path / "tls.crt", tmp_path / "tls.key"
    certfile.write_bytes(serving.cert_pem)
    keyfile.write_bytes(serving.key_pem)
    port = free_port()
    app = settings_app(
        config=kube_config,
        webhook=WebhookServer(
            certfile=str(certfile), keyfile=str(keyfile), host="127.0.0.1", port=port
        ),
    )
    seen: list[object] = []

    @app.validate(ConfigMap, path="/validate/settings")
    def remember(request: AdmissionRequest[ConfigMap]) -> None:
        seen.append(request.cached(ConfigMap).get("present"))

    kube_config.client(ConfigMap).create(
        ConfigMap.model_validate(
            {"metadata": {"name": "present", "labels": {"example.com/manage": "true"}}}
        )
    )
    run = running(app)
    app.wait_ready(timeout=15)
    assert wait_until(lambda: app.manager.ready)
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "operation": "CREATE",
            "name": "new",
            "namespace": "default",
            "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "new"}},
            "oldObject": None,
            "dryRun": False,
            "userInfo": {"username": "alice"},
        },
    }
    context = ssl.create_default_context(cadata=default_ca().cert_pem.decode())
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    connection.request(
        "POST",
        "/validate/settings",
        body=json.dumps(review),
        headers={"Content-Type": "application/json"},
    )
    response = connection.getresponse()
    answer = json.loads(response.read())
    connection.close()
    assert response.status == 200 and answer["response"]["allowed"] is True
    assert len(seen) == 1 and isinstance(seen[0], ConfigMap) and seen[0].name == "present"
    scrape = http.client.HTTPSConnection("127.0.0.1", port, context=context)
    status, text = get(scrape, "/metrics", kube_emulator.admin_token)
    assert status == 200
    assert (
        'controller_runtime_webhook_requests_total{code="200",webhook="/validate/settings"} 1.0'
        in text
    )
    # The route's own handler slots, and the body limit enforced before reading.
    assert 'cloudcoil_webhook_handler_slots{webhook="/validate/settings"} 16.0' in text
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        tls.sendall(
            b"POST /validate/settings HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nContent-Length: 15728640\r\n\r\n{"
        )
        assert tls.recv(65536).startswith(b"HTTP/1.1 413 ")
    assert run.close() is None


def test_the_webhook_listener_answers_the_named_checks(
    kube_config: Config, running: StartApp, tmp_path: Path
) -> None:
    """The Deployment's probes go to the webhook listener when there is one: a user check
    must show there (`?verbose`) and a failing one turn its /readyz false."""
    serving = default_ca().issue()
    certfile, keyfile = tmp_path / "tls.crt", tmp_path / "tls.key"
    certfile.write_bytes(serving.cert_pem)
    keyfile.write_bytes(serving.key_pem)
    port = free_port()
    app = settings_app(
        config=kube_config,
        webhook=WebhookServer(
            certfile=str(certfile), keyfile=str(keyfile), host="127.0.0.1", port=port
        ),
    )
    database = threading.Event()
    database.set()

    @app.health_check("database", period=0.05)
    def reachable() -> bool:
        return database.is_set()

    @app.validate(ConfigMap)
    def allow(request: AdmissionRequest[ConfigMap]) -> None:
        return None

    run = running(app)
    app.wait_ready(timeout=15)
    context = ssl.create_default_context(cadata=default_ca().cert_pem.decode())

    def probe(path: str) -> tuple[int, str]:
        return get(http.client.HTTPSConnection("127.0.0.1", port, context=context), path)

    assert wait_until(lambda: probe("/readyz") == (200, "ok\n"), timeout=10)
    assert "[+]database ok" in probe("/readyz?verbose")[1]
    database.clear()
    assert wait_until(lambda: probe("/readyz") == (503, "not ready\n"), timeout=10)
    assert "[-]database failed" in probe("/readyz/database")[1]
    assert probe("/healthz") == (200, "ok\n")  # a readiness check only
    assert run.close() is None
