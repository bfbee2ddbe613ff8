"""Exec credential plugins (``users[].user.exec`` in kubeconfig).

The plugin prints an ``ExecCredential`` (client.authentication.k8s.io/v1 or v1beta1) whose
``status`` carries a token and/or client certificate data and an optional
``expirationTimestamp``. Credentials are cached until shortly before they expire and the
plugin is re-run after expiry or a 401.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from cloudcoil_sync.client._internal.auth import Auth
from cloudcoil_sync.client._internal.errors import ConfigError
from cloudcoil_sync.client._internal.files import PrivateFiles

__all__ = ["SUPPORTED_API_VERSIONS", "ExecProvider"]

SUPPORTED_API_VERSIONS = (
    "client.authentication.k8s.io/v1",
    "client.authentication.k8s.io/v1beta1",
)


def _parse_time(value: str) -> float:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise ConfigError(f"exec plugin returned a bad expirationTimestamp {value!r}") from None


class ExecProvider(Auth):
    """Runs a credential plugin and caches what it returns."""

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        api_version: str = "client.authentication.k8s.io/v1",
        install_hint: str | None = None,
        cluster: Mapping[str, Any] | None = None,
        timeout: float = 60.0,
        refresh_margin: float = 30.0,
    ) -> None:
        if api_version not in SUPPORTED_API_VERSIONS:
            raise ConfigError(
                f"exec plugin apiVersion {api_version!r} is not supported "
                f"(use one of {', '.join(SUPPORTED_API_VERSIONS)})"
            )
        self.command = command
        self.args = list(args)
        self.env = dict(env or {})
        self.api_version = api_version
        self.install_hint = install_hint
        self.cluster = dict(cluster) if cluster is not None else None
        self.timeout = timeout
        self.refresh_margin = refresh_margin
        self._lock = threading.Lock()
        self._files = PrivateFiles("cloudcoil-sync-exec-")
        self._header: str | None = None
        self._cert: tuple[str, str] | None = None
        self._expires: float | None = None
        self._valid = False
        self.runs = 0

    @classmethod
    def from_kubeconfig(
        cls, spec: Mapping[str, Any], *, cluster: Mapping[str, Any] | None = None
    ) -> ExecProvider:
        """Build from a kubeconfig ``exec`` stanza (paths already resolved)."""
        if not spec.get("command"):
            raise ConfigError("kubeconfig exec stanza has no command")
        if spec.get("interactiveMode") == "Always":
            raise ConfigError(
                f"exec plugin {spec['command']!r} requires interactive input "
                "(interactiveMode: Always), which an operator cannot provide"
            )
        env = {str(e["name"]): str(e.get("value", "")) for e in spec.get("env") or []}
        return cls(
            str(spec["command"]),
            [str(a) for a in spec.get("args") or []],
            env=env,
            api_version=str(spec.get("apiVersion") or "client.authentication.k8s.io/v1"),
            install_hint=spec.get("installHint"),
            cluster=cluster if spec.get("provideClusterInfo") else None,
        )

    def _exec_info(self) -> str:
        spec: dict[str, Any] = {"interactive": False}
        if self.cluster is not None:
            spec["cluster"] = self.cluster
        return json.dumps({"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec})

    def _run(self) -> dict[str, Any]:
        env = {**os.environ, **self.env, "KUBERNETES_EXEC_INFO": self._exec_info()}
        hint = f" ({self.install_hint.strip()})" if self.install_hint else ""
        try:
            proc = subprocess.run(
                [self.command, *self.args],
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=self.timeout,
                check=False,
            )
        except FileNotFoundError:
            raise ConfigError(f"exec plugin {self.command!r} not found{hint}") from None
        except subprocess.TimeoutExpired:
            raise ConfigError(
                f"exec plugin {self.command!r} did not finish within {self.timeout:g}s"
            ) from None
        except OSError as exc:
            raise ConfigError(f"cannot run exec plugin {self.command!r}: {exc}") from exc
        self.runs += 1
        if proc.returncode != 0:
            err = proc.stderr.decode("utf-8", "replace").strip()[-500:]
            raise ConfigError(
                f"exec plugin {self.command!r} exited with {proc.returncode}: {err}{hint}"
            )
        try:
            cred = json.loads(proc.stdout)
        except ValueError:
            raise ConfigError(f"exec plugin {self.command!r} did not print JSON") from None
        if not isinstance(cred, dict) or cred.get("kind") != "ExecCredential":
            raise ConfigError(f"exec plugin {self.command!r} did not print an ExecCredential")
        if cred.get("apiVersion") != self.api_version:
            raise ConfigError(
                f"exec plugin {self.command!r} returned apiVersion {cred.get('apiVersion')!r}, "
                f"expected {self.api_version!r}"
            )
        status = cred.get("status")
        if not isinstance(status, dict):
            raise ConfigError(f"exec plugin {self.command!r} returned no status")
        return status

    def _refresh(self) -> None:
        status = self._run()
        token = status.get("token")
        cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
        if not token and not (cert and key):
            raise ConfigError(
                f"exec plugin {self.command!r} returned neither a token nor a client certificate"
            )
        self._header = f"Bearer {token}" if token else None
        self._cert = None
        if cert and key:
            n = self.runs
            self._cert = (
                self._files.write(f"client-{n}.crt", cert.encode()),
                self._files.write(f"client-{n}.key", key.encode()),
            )
        expiry = status.get("expirationTimestamp")
        self._expires = _parse_time(expiry) if expiry else None
        self._valid = True

    def _ensure_locked(self) -> None:
        fresh = self._valid and (
            self._expires is None or time.time() < self._expires - self.refresh_margin
        )
        if not fresh:
            self._refresh()

    def credentials(self) -> tuple[str | None, tuple[str, str] | None]:
        with self._lock:
            self._ensure_locked()
            return self._header, self._cert

    def authorization(self) -> str | None:
        return self.credentials()[0]

    def client_cert(self) -> tuple[str, str] | None:
        return self.credentials()[1]

    def invalidate(self) -> bool:
        with self._lock:
            self._valid = False
        return True

    def close(self) -> None:
        self._files.close()
