"""The server itself: TLS, keep-alive, lifecycle, request log, plugin fixtures."""

from __future__ import annotations

import socket
import ssl
import threading
from typing import Any

import pytest
import requests

from cloudcoil_sync.testing import Emulator

from .conftest import Client, configmap

CM = "/api/v1/namespaces/default/configmaps"


def test_keep_alive_reuses_one_connection(client: Client) -> None:
    for i in range(5):
        assert client.post(CM, configmap(f"c{i}", k="v")).status_code == 201
    assert client.get(CM).json()["items"][4]["metadata"]["name"] == "c4"
    assert client.emulator.connections_accepted == 1


def test_request_log_records_method_path_user_status(client: Client) -> None:
    client.get(CM + "/missing")
    client.post(CM, configmap("x"))
    log = [(e.method, e.path, e.user, e.status) for e in client.emulator.request_log]
    assert log == [
        ("GET", CM + "/missing", "system:admin", 404),
        ("POST", CM, "system:admin", 201),
    ]


def test_tls_is_verified_with_the_emulator_ca(kube_emulator: Emulator) -> None:
    ctx = ssl.create_default_context(cadata=kube_emulator.ca_pem.decode())
    assert ctx.minimum_version >= ssl.TLSVersion.TLSv1_2
    with (
        socket.create_connection(("127.0.0.1", kube_emulator.port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        assert tls.version() in ("TLSv1.2", "TLSv1.3")
    untrusted = requests.Session()
    untrusted.trust_env = False
    try:
        untrusted.get(kube_emulator.url + "/version", timeout=5)
    except requests.exceptions.SSLError:
        pass
    else:
        raise AssertionError("a client without the emulator CA must not connect")


def test_plain_http_mode_and_stop_joins_threads() -> None:
    before = {t.ident for t in threading.enumerate()}
    emulator = Emulator(tls=False)
    emulator.start()
    assert emulator.url.startswith("http://")
    session = requests.Session()
    session.trust_env = False
    response = session.get(
        emulator.url + "/version",
        timeout=5,
        headers={"Authorization": f"Bearer {emulator.admin_token}"},
    )
    assert response.json()["major"] == "1"
    emulator.stop()
    session.close()
    left = [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    assert left == []


def test_stop_closes_open_watch_promptly(client: Client) -> None:
    emulator = client.emulator
    opened = threading.Event()
    result: list[int] = []

    def watch() -> None:
        with client.get(CM + "?watch=true&timeoutSeconds=60", stream=True) as response:
            opened.set()
            result.append(response.status_code)
            for _ in response.iter_lines():
                pass

    thread = threading.Thread(target=watch)
    thread.start()
    assert opened.wait(5)
    assert emulator.wait_for(lambda: emulator.open_watches == 1)
    emulator.stop()
    thread.join(5)
    assert not thread.is_alive()
    assert result == [200]


def test_unknown_path_is_404_status(client: Client) -> None:
    response = client.get("/apis/nope.example.com/v1/things")
    assert response.status_code == 404
    assert response.json()["kind"] == "Status"


def test_kube_config_fixture_drives_the_project_client(
    kube_emulator: Emulator, kube_config: Any
) -> None:
    from cloudcoil.models.kubernetes.core.v1 import ConfigMap

    assert kube_config.server == kube_emulator.url
    api = kube_config.client(ConfigMap)
    api.create(ConfigMap.model_validate({"metadata": {"name": "via-client"}, "data": {"a": "b"}}))
    assert api.get("via-client").data == {"a": "b"}
    kube_config.close()
    assert kube_emulator.request_log[-1].user == "system:admin"


@pytest.mark.kube_emulator(tls=False, history_size=5)
def test_marker_passes_emulator_options(kube_emulator: Emulator) -> None:
    assert kube_emulator.url.startswith("http://")
    assert kube_emulator.store.history_size == 5


def test_create_object_helper(kube_emulator: Emulator) -> None:
    created = kube_emulator.create_object(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d"},
            "spec": {
                "selector": {"matchLabels": {"app": "d"}},
                "template": {
                    "metadata": {"labels": {"app": "d"}},
                    "spec": {"containers": [{"name": "c", "image": "i:1"}]},
                },
            },
        }
    )
    assert created["metadata"]["generation"] == 1
    assert kube_emulator.get_object("apps", "deployments", "default", "d") is not None


def test_silent_client_does_not_block_others(client: Client) -> None:
    # A TCP connection that never starts its TLS handshake must not hold up the server.
    with socket.create_connection(("127.0.0.1", client.emulator.port), timeout=5):
        assert client.get(CM).status_code == 200
        with socket.create_connection(("127.0.0.1", client.emulator.port), timeout=5) as half:
            half.sendall(b"\x16\x03\x01")  # a partial ClientHello
            assert client.post(CM, configmap("still-served")).status_code == 201


def test_connection_close_header_is_honoured(client: Client) -> None:
    first = client.get(CM, headers={"Connection": "close"})
    assert first.headers.get("Connection") == "close"
    client.get(CM)
    assert client.emulator.connections_accepted == 2
