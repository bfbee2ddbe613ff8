"""Load the example operators fresh and run them against the emulator.

The examples are scripts, not a package: ``examples/`` and ``examples/patterns/`` go on
``sys.path`` (as they are when a script runs) and each load re-executes the module, so every
test gets a new, never-run ``Application``.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

from ports import free_port

from cloudcoil_sync.application import Application
from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import LeaderElection
from cloudcoil_sync.testing import Emulator
from cloudcoil_sync.testing._internal.tls import CertificateAuthority

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PATTERNS = EXAMPLES / "patterns"
KOPF_PORTS = EXAMPLES / "kopf_ports"
PEM_CA = CertificateAuthority("examples-manifests-ca").cert_pem

for _path in (KOPF_PORTS, PATTERNS, EXAMPLES):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))


def load(name: str) -> ModuleType:
    """Import example module `name` (``widget_operator``, a pattern ...) afresh."""
    module = sys.modules.get(name)
    if module is None:
        return importlib.import_module(name)
    return importlib.reload(module)


def prepare(
    app: Application,
    kube: Emulator,
    directory: Path,
    *,
    installed: bool = True,
    service_account: bool = False,
) -> Config:
    """Point `app` at `kube`: its Config and a short Lease; install it (``installed``) with a
    test CA, then move its webhook server to a loopback port the emulator routes to.

    With ``service_account`` the operator runs with its generated ServiceAccount's token (so
    with exactly its generated RBAC); the returned Config is always the admin's.
    """
    config = kube.config(namespace=app.namespace)
    app.config = config
    if app.leader_election is not None:
        app.leader_election = LeaderElection(
            app.leader_election.name, lease_duration=2, renew_deadline=1.5, retry_period=0.3
        )
    ca = CertificateAuthority(f"{app.name}-test-ca")
    if installed:
        install(app, config, ca_bundle=ca.cert_pem if app.webhook is not None else None)
    if app.webhook is not None:
        serving = ca.issue((f"{app.name}.{app.namespace}.svc", "127.0.0.1"))
        (directory / "tls.crt").write_bytes(serving.cert_pem)
        (directory / "tls.key").write_bytes(serving.key_pem)
        port = free_port()
        app.webhook = dataclasses.replace(
            app.webhook,
            ca_bundle=ca.cert_pem,
            certfile=str(directory / "tls.crt"),
            keyfile=str(directory / "tls.key"),
            host="127.0.0.1",
            port=port,
        )
        kube.route_service(app.namespace, app.name, "127.0.0.1", port)
    if service_account:
        token = kube.service_account_token(app.namespace, app.name)
        app.config = kube.config(namespace=app.namespace, token=token)
    return config


class Running:
    """`app.run(stop=...)` on a thread; `close()` stops, joins and re-raises its failure."""

    def __init__(self, app: Application) -> None:
        self.app = app
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=f"example-{app.name}")

    def _run(self) -> None:
        try:
            self.app.run(stop=self.stop)
        except BaseException as error:
            self.error = error

    def start(self, timeout: float = 20) -> Running:
        self.thread.start()
        self.app.wait_ready(timeout)
        return self

    def close(self, timeout: float = 30) -> None:
        self.stop.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"{self.app.name} did not stop"
        if self.error is not None:
            raise self.error


def install(app: Application, config: Config, **options: Any) -> None:
    """``install``; with webhooks, an image the rollout simulator makes available."""
    if app.webhook is not None and options.get("include_webhooks", True):
        options.setdefault("image", "example/operator:test")
    else:
        options.setdefault("include_webhooks", False)
    app.install(config=config, timeout=30, **options)


def conditions(obj: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    items = ((obj or {}).get("status") or {}).get("conditions") or []
    return {item["type"]: item for item in items}
