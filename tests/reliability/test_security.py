"""Scenario 7: TLS only (no plaintext, TLS >= 1.2) on a running operator's listener, and
private keys never in `app.manifests(...)` nor in anything a run logs — even when its
admission handler crashes and clients fail their handshakes.

Scenario 8 (generated RBAC without wildcards, the operator converging under exactly its
generated RBAC with zero 403s) is covered by tests/examples/test_example_manifests.py
(`test_manifests_are_offline_deterministic_and_without_wildcards`) and
tests/examples/test_widget_operator.py (run with the generated ServiceAccount, no 403 in the
emulator's request log), and tests/install/test_privileges.py.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import socket
import ssl
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from ports import free_port

from cloudcoil_sync.admission import AdmissionRequest
from cloudcoil_sync.application import Application, WebhookServer
from cloudcoil_sync.client import Config
from cloudcoil_sync.client._internal.errors import APIError
from cloudcoil_sync.testing import Emulator
from cloudcoil_sync.testing._internal.tls import CertificateAuthority, ServingCert

from .conftest import CONFIGMAPS, Record, Running, configmap, converge, echo_operator

ROOT = Path(__file__).resolve().parents[2]


def key_fragments(serving: ServingCert) -> list[str]:
    """Lines of the private key's base64 body: none may appear anywhere."""
    lines = serving.key_pem.decode().strip().splitlines()
    return [line for line in lines if not line.startswith("-----")]


def leaks(text: str, serving: ServingCert) -> list[str]:
    found = [fragment for fragment in key_fragments(serving) if fragment in text]
    if "PRIVATE KEY" in text:
        found.append("PRIVATE KEY")
    return found


def load_example(name: str) -> ModuleType:
    """Execute examples/<name>.py afresh under a private module name."""
    spec = importlib.util.spec_from_file_location(
        f"reliability_{name}", ROOT / "examples" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module


def serving_files(
    tmp_path: Path, names: tuple[str, ...]
) -> tuple[CertificateAuthority, ServingCert]:
    ca = CertificateAuthority("reliability-security-ca")
    serving = ca.issue(names)
    (tmp_path / "tls.crt").write_bytes(serving.cert_pem)
    (tmp_path / "tls.key").write_bytes(serving.key_pem)
    return ca, serving


def local_webhook(
    tmp_path: Path, names: tuple[str, ...]
) -> tuple[CertificateAuthority, ServingCert, WebhookServer]:
    """A CA, serving files for `names` under `tmp_path`, and a WebhookServer serving them
    on a free loopback port (its `port`)."""
    ca, serving = serving_files(tmp_path, names)
    server = WebhookServer(
        ca_bundle=ca.cert_pem,
        certfile=str(tmp_path / "tls.crt"),
        keyfile=str(tmp_path / "tls.key"),
        host="127.0.0.1",
        port=free_port(),
    )
    return ca, serving, server


def test_no_private_key_in_the_example_manifests(tmp_path: Path) -> None:
    module = load_example("widget_operator")
    app: Application = module.app
    ca, serving = serving_files(tmp_path, ("widgets.default.svc",))
    # Point the settings at real key material: the manifests must still not carry it.
    assert app.webhook is not None
    app.webhook = dataclasses.replace(
        app.webhook,
        ca_bundle=ca.cert_pem,
        certfile=str(tmp_path / "tls.crt"),
        keyfile=str(tmp_path / "tls.key"),
    )
    documents = app.manifests(image="widgets:v1", ca_bundle=ca.cert_pem)
    text = yaml.safe_dump_all(documents) + app.to_yaml(image="widgets:v1", ca_bundle=ca.cert_pem)
    assert leaks(text, serving) == []
    assert "Secret" not in {doc["kind"] for doc in documents}  # mounted, never generated


def test_tls_only_and_no_private_key_in_the_logs_of_a_run(
    kube_emulator: Emulator,
    kube_config: Config,
    tmp_path: Path,
    operators: Callable[[Application], Running],
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    kube = kube_emulator
    name, namespace = "reliability", "default"
    ca, serving, webhook = local_webhook(tmp_path, (f"{name}.{namespace}.svc", "127.0.0.1"))
    port = webhook.port
    record = Record()
    app, _ = echo_operator(kube_config, record)
    app.webhook = webhook

    @app.mutate(ConfigMap)
    def stamp(request: AdmissionRequest[ConfigMap]) -> ConfigMap | None:
        resource = request.resource
        if resource is None or resource.metadata is None:
            return None
        if (resource.data or {}).get("crash"):
            raise RuntimeError("admission handler defect")
        resource.metadata.annotations = {"stamped": "yes"}
        return resource

    for document in app.webhook_configurations(ca.cert_pem):
        kube.create_object(document)
    kube.route_service(namespace, name, "127.0.0.1", port)
    operators(app)

    # The operator converges through its own webhook (called by the emulator over HTTPS).
    api = kube_config.client(CONFIGMAPS)
    for i in range(5):
        api.create(configmap(f"cm-{i}", f"v{i}"))
    assert converge(kube, {f"cm-{i}": f"v{i}" for i in range(5)}, timeout=15) == []
    stored = kube.get_object("", "configmaps", namespace, "cm-0") or {}
    assert stored["metadata"]["annotations"] == {"stamped": "yes"}
    # A crashing handler: a 500 to the API server (failurePolicy Fail refuses the write).
    with pytest.raises(APIError) as refused:
        api.create(configmap("crash", "x", crash="1"))
    assert refused.value.status_code == 500 and "webhook" in str(refused.value)

    # No plaintext: an HTTP request on the port gets no HTTP answer.
    with socket.create_connection(("127.0.0.1", port), timeout=5) as plain:
        plain.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            answer = plain.recv(1024)
        except (ConnectionResetError, TimeoutError):
            answer = b""
    assert not answer.startswith(b"HTTP/")
    # TLS 1.2 minimum: a client capped at TLS 1.1 cannot connect.
    old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    old.load_verify_locations(cadata=ca.cert_pem.decode())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # that is the point
        old.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
        old.maximum_version = ssl.TLSVersion.TLSv1_1
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        pytest.raises((ssl.SSLError, OSError)),
    ):
        old.wrap_socket(raw, server_hostname="127.0.0.1").close()
    # A client that does not trust the server fails its handshake (logged by the server).
    untrusting = ssl.create_default_context()
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        pytest.raises(ssl.SSLError),
    ):
        untrusting.wrap_socket(raw, server_hostname="127.0.0.1").close()
    modern = ssl.create_default_context(cadata=ca.cert_pem.decode())
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        modern.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        assert tls.version() in ("TLSv1.2", "TLSv1.3")

    assert record.passes  # the run did work, and logged it
    assert any(r.levelno >= logging.WARNING for r in caplog.records)  # the crash was logged
    out, err = capfd.readouterr()
    assert leaks(caplog.text, serving) == []
    assert leaks(out + err, serving) == []
