"""Run an operator under test against the emulator, as its generated ServiceAccount.

``OperatorRunner`` (the ``kube_operator`` fixture) installs an ``Application`` (CRDs, RBAC,
Service, webhooks with a test CA), moves its webhook server to a loopback port the emulator
routes the Service to, runs it on a thread with a token of its own ServiceAccount (so with
exactly its generated RBAC; ``admin=True`` opts into the admin token) and waits until it is
ready. ``close`` stops and joins it, re-raises what ``run`` raised, and fails if the operator
was refused anything: each 403 is listed with kube-apiserver's message (verb, resource, API
group, namespace). ``RBACUsage`` collects, across a session, what each operator's RBAC grants
and what it used (``--cloudcoil-rbac-report``).
"""

from __future__ import annotations

import dataclasses
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cloudcoil_sync.testing._internal.backend import AccessRecord
from cloudcoil_sync.testing._internal.status import forbidden
from cloudcoil_sync.testing._internal.tls import CertificateAuthority

if TYPE_CHECKING:
    from cloudcoil_sync.application import Application
    from cloudcoil_sync.client import Config
    from cloudcoil_sync.testing._internal.emulator import Emulator

__all__ = ["OperatorRunner", "Permission", "RBACUsage"]

JSON = dict[str, Any]


@dataclass(frozen=True, order=True)
class Permission:
    """One verb on one resource (``name``: a ``resourceNames`` entry, or empty for any)."""

    group: str
    resource: str
    verb: str
    name: str = ""

    def __str__(self) -> str:
        group = self.group or "core"
        named = f" {self.name!r}" if self.name else ""
        return f"{self.verb} {self.resource}{named} ({group})"


@dataclass
class RBACUsage:
    """Per operator (``namespace/name``): permissions its RBAC grants, and those it used."""

    granted: dict[str, set[Permission]] = field(default_factory=dict)
    used: dict[str, set[Permission]] = field(default_factory=dict)

    def record(self, operator: str, manifests: list[JSON], records: list[AccessRecord]) -> None:
        granted = self.granted.setdefault(operator, set())
        for doc in manifests:
            if doc.get("kind") in ("Role", "ClusterRole"):
                granted.update(_permissions(doc.get("rules") or []))
        used = self.used.setdefault(operator, set())
        for record in records:
            if record.allowed:
                resource = record.resource + (
                    f"/{record.subresource}" if record.subresource else ""
                )
                used.add(Permission(record.group, resource, record.verb, record.name))

    def unused(self, operator: str) -> list[Permission]:
        """Granted permissions no request of the operator needed."""
        used = self.used.get(operator, set())
        return sorted(p for p in self.granted.get(operator, set()) if not _covers(p, used))

    def dump(self) -> JSON:
        """This usage as plain data (sent by a pytest-xdist worker to the controller)."""
        return {
            "granted": {k: [dataclasses.astuple(p) for p in v] for k, v in self.granted.items()},
            "used": {k: [dataclasses.astuple(p) for p in v] for k, v in self.used.items()},
        }

    def merge(self, dumped: JSON) -> None:
        """Add another process's ``dump()``."""
        for key, target in (("granted", self.granted), ("used", self.used)):
            for operator, permissions in (dumped.get(key) or {}).items():
                target.setdefault(operator, set()).update(Permission(*p) for p in permissions)

    def report(self) -> list[str]:
        lines = []
        for operator in sorted(self.granted):
            unused = self.unused(operator)
            total = len(self.granted[operator])
            lines.append(f"{operator}: {total - len(unused)} of {total} granted permissions used")
            lines.extend(f"  never used: {permission}" for permission in unused)
        return lines


def _permissions(rules: list[JSON]) -> Iterator[Permission]:
    for rule in rules:
        names = rule.get("resourceNames") or [""]
        for group in rule.get("apiGroups") or []:
            for resource in rule.get("resources") or []:
                for verb in rule.get("verbs") or []:
                    for name in names:
                        yield Permission(group, resource, verb, name)


def _covers(granted: Permission, used: set[Permission]) -> bool:
    return any(
        u.group == granted.group
        and u.resource == granted.resource
        and u.verb == granted.verb
        and (not granted.name or u.name == granted.name)
        for u in used
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class _Running:
    def __init__(self, app: Application, user: str) -> None:
        self.app = app
        self.user = user
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=f"kube-operator-{app.name}")

    def _run(self) -> None:
        try:
            self.app.run(stop=self.stop)
        except BaseException as error:  # re-raised by close()
            self.error = error


class OperatorRunner:
    """Install and run Applications against ``emulator`` (see the module docstring)."""

    def __init__(
        self,
        emulator: Emulator,
        directory: Path,
        *,
        admin: bool = False,
        usage: RBACUsage | None = None,
    ) -> None:
        self.emulator = emulator
        self.directory = directory
        self.admin = admin
        self.usage = usage
        self._running: list[_Running] = []

    def __call__(
        self,
        app: Application,
        *,
        install: bool = True,
        admin: bool | None = None,
        timeout: float = 30.0,
    ) -> Config:
        """Install and run ``app``; returns an admin Config for the test's own requests."""
        from cloudcoil_sync.controller import LeaderElection

        kube = self.emulator
        config = kube.config(namespace=app.namespace)
        app.config = config
        if app.leader_election is not None:  # a released Lease is taken at once; keep it short
            app.leader_election = LeaderElection(
                app.leader_election.name, lease_duration=2, renew_deadline=1.5, retry_period=0.3
            )
        ca = CertificateAuthority(f"{app.name}-test-ca")
        if install:
            _install(app, config, ca.cert_pem, timeout)
        if app.webhook is not None:
            self._serve_webhooks_locally(app, ca)
        user = "admin"
        if not (self.admin if admin is None else admin):
            token = kube.service_account_token(app.namespace, app.name)
            app.config = kube.config(namespace=app.namespace, token=token)
            user = f"system:serviceaccount:{app.namespace}:{app.name}"
        running = _Running(app, user)
        self._running.append(running)
        running.thread.start()
        app.wait_ready(timeout)
        return config

    def _serve_webhooks_locally(self, app: Application, ca: CertificateAuthority) -> None:
        assert app.webhook is not None
        serving = ca.issue((f"{app.name}.{app.namespace}.svc", "127.0.0.1"))
        certfile, keyfile = self.directory / f"{app.name}.crt", self.directory / f"{app.name}.key"
        certfile.write_bytes(serving.cert_pem)
        keyfile.write_bytes(serving.key_pem)
        port = _free_port()
        app.webhook = dataclasses.replace(
            app.webhook,
            ca_bundle=ca.cert_pem,
            certfile=str(certfile),
            keyfile=str(keyfile),
            host="127.0.0.1",
            port=port,
        )
        self.emulator.route_service(app.namespace, app.name, "127.0.0.1", port)

    def forbidden(self) -> list[str]:
        """kube-apiserver's message for every request a running operator was refused."""
        users = {r.user for r in self._running if r.user != "admin"}
        out = []
        for record in self.emulator.access_log:
            if record.user in users and not record.allowed:
                err = forbidden(
                    record.user,
                    record.verb,
                    record.resource,
                    record.group,
                    record.name,
                    record.namespace,
                    record.subresource,
                )
                if err.message not in out:
                    out.append(err.message)
        return out

    def close(self, timeout: float = 30.0) -> None:
        """Stop and join every operator; raise what one raised, or list what was refused."""
        for running in self._running:
            running.stop.set()
        for running in self._running:
            running.thread.join(timeout)
            if running.thread.is_alive():
                raise RuntimeError(f"operator {running.app.name} did not stop in {timeout} s")
        self._record_usage()
        for running in self._running:
            if running.error is not None:
                raise running.error
        refused = self.forbidden()
        if refused:
            raise AssertionError(
                "the operator was refused (403) by its generated RBAC; declare what it needs "
                "with RBACRule(...):\n  " + "\n  ".join(refused)
            )

    def _record_usage(self) -> None:
        if self.usage is None:
            return
        log = self.emulator.access_log
        for running in self._running:
            if running.user == "admin":
                continue
            app = running.app
            manifests = app.manifests(include_webhooks=False)
            records = [r for r in log if r.user == running.user]
            self.usage.record(f"{app.namespace}/{app.name}", manifests, records)


def _install(app: Application, config: Config, ca_bundle: bytes, timeout: float) -> None:
    options: dict[str, Any] = {"config": config, "timeout": timeout}
    if app.webhook is not None:
        options.update(image="cloudcoil-test/operator:latest", ca_bundle=ca_bundle)
    else:
        options["include_webhooks"] = False
    app.install(**options)
