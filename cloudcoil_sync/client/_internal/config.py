"""``Config``: where the API server is, how to trust it and authenticate, and the shared pool.

Construction never touches the network. One :class:`~.transport.Transport`
(one pooled ``requests.Session``) per Config, shared by every client made from it.

Defaults: ``qps=1000``, ``burst=2000`` (a guard against runaway loops that never limits a
healthy operator; API Priority and Fairness protects the server; ``qps<=0`` disables it),
``timeout=30`` s read / ``connect_timeout=10`` s, 5 retries, ``pool_maxsize=64`` connections
(each open watch holds one).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload
from urllib.parse import urlsplit

import requests.utils

from cloudcoil_sync.client._internal.auth import Auth, FileToken, StaticToken
from cloudcoil_sync.client._internal.errors import ConfigError
from cloudcoil_sync.client._internal.exec_auth import ExecProvider
from cloudcoil_sync.client._internal.files import PrivateFiles
from cloudcoil_sync.client._internal.kubeconfig import default_paths, load_kubeconfig
from cloudcoil_sync.client._internal.retry import RetryPolicy
from cloudcoil_sync.client._internal.tls import check_ca, check_pair, pem_text
from cloudcoil_sync.client._internal.transport import Transport

if TYPE_CHECKING:
    from cloudcoil_sync.client._internal.api import ResourceClient
    from cloudcoil_sync.client._internal.discovery import RESTMapper

__all__ = ["DEFAULT_BURST", "DEFAULT_QPS", "SERVICE_ACCOUNT_DIR", "Config"]

DEFAULT_QPS = 1000.0
DEFAULT_BURST = 2000
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
T = TypeVar("T")


class Config:
    """Connection settings for one API server plus the shared connection pool."""

    def __init__(
        self,
        server: str,
        *,
        token: str | None = None,
        token_file: str | os.PathLike[str] | None = None,
        ca_data: bytes | str | None = None,
        ca_file: str | os.PathLike[str] | None = None,
        client_cert_data: bytes | str | None = None,
        client_cert_file: str | os.PathLike[str] | None = None,
        client_key_data: bytes | str | None = None,
        client_key_file: str | os.PathLike[str] | None = None,
        insecure_skip_tls_verify: bool = False,
        namespace: str = "default",
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        timeout: float = 30.0,
        connect_timeout: float = 10.0,
        max_retries: int = 5,
        pool_maxsize: int = 64,
        proxy_url: str | None = None,
        tls_server_name: str | None = None,
        exec_provider: ExecProvider | None = None,
        auth: Auth | None = None,
    ) -> None:
        parts = urlsplit(server or "")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"server {server!r} is not an http(s) URL with a host")
        self.server = server.rstrip("/")
        self.namespace = namespace or "default"
        self._files = PrivateFiles()
        try:
            verify = self._tls(ca_data, ca_file, insecure_skip_tls_verify, parts.scheme == "https")
            cert = self._client_cert(
                client_cert_data, client_cert_file, client_key_data, client_key_file
            )
            self.auth = auth or self._auth(token, token_file, exec_provider)
        except BaseException:
            self._files.close()
            raise
        proxies = self._proxies(proxy_url)
        self.transport = Transport(
            self.server,
            auth=self.auth,
            verify=verify,
            cert=cert,
            proxies=proxies,
            qps=qps,
            burst=burst,
            timeout=timeout,
            connect_timeout=connect_timeout,
            retry=RetryPolicy(max_retries=max_retries),
            pool_maxsize=pool_maxsize,
            tls_server_name=tls_server_name,
        )
        self._mapper: RESTMapper | None = None

    # -- construction helpers ------------------------------------------------------------
    def _tls(
        self, ca_data: bytes | str | None, ca_file: Any, insecure: bool, https: bool
    ) -> bool | str:
        if insecure:
            return False
        if ca_file is not None:
            check_ca(None, str(ca_file))
            return str(ca_file)
        if ca_data is not None and https:
            check_ca(ca_data, None)
            return self._files.write("ca.crt", pem_text(ca_data).encode())
        return True

    def _client_cert(
        self,
        cert_data: bytes | str | None,
        cert_file: Any,
        key_data: bytes | str | None,
        key_file: Any,
    ) -> tuple[str, str] | None:
        has_cert = cert_data is not None or cert_file is not None
        has_key = key_data is not None or key_file is not None
        if not has_cert and not has_key:
            return None
        if has_cert != has_key:
            missing = "key" if has_cert else "certificate"
            raise ConfigError(
                f"client certificate and key must be given together ({missing} missing)"
            )
        cert = (
            str(cert_file)
            if cert_file is not None
            else self._files.write("client.crt", pem_text(cert_data or "").encode())
        )
        key = (
            str(key_file)
            if key_file is not None
            else self._files.write("client.key", pem_text(key_data or "").encode())
        )
        check_pair(cert, key)
        return cert, key

    @staticmethod
    def _auth(token: str | None, token_file: Any, exec_provider: ExecProvider | None) -> Auth:
        if token:
            return StaticToken(token)
        if token_file is not None:
            return FileToken(token_file)
        if exec_provider is not None:
            return exec_provider
        return Auth()

    def _proxies(self, proxy_url: str | None) -> dict[str, str]:
        if proxy_url:
            return {"http": proxy_url, "https": proxy_url}
        # trust_env is off on the session; honour the proxy variables (and NO_PROXY) here.
        return dict(requests.utils.get_environ_proxies(self.server))

    # -- alternative constructors --------------------------------------------------------
    @classmethod
    def from_kubeconfig(
        cls,
        path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
        context: str | None = None,
        **overrides: Any,
    ) -> Config:
        """From kubeconfig: ``path`` (or ``$KUBECONFIG`` list, or ``~/.kube/config``)."""
        kwargs = load_kubeconfig(path, context)
        # an override of one form (data or file) replaces the kubeconfig's other form
        for pair in (
            ("ca_data", "ca_file"),
            ("client_cert_data", "client_cert_file"),
            ("client_key_data", "client_key_file"),
            ("token", "token_file"),
        ):
            for given, other in (pair, pair[::-1]):
                if given in overrides:
                    kwargs.pop(other, None)
        return cls(**{**kwargs, **overrides})

    @classmethod
    def in_cluster(
        cls, *, service_account_dir: str | os.PathLike[str] = SERVICE_ACCOUNT_DIR, **overrides: Any
    ) -> Config:
        """From the pod's service account; the token file is re-read when it rotates."""
        host = os.environ.get("KUBERNETES_SERVICE_HOST")
        port = os.environ.get("KUBERNETES_SERVICE_PORT")
        if not host or not port:
            raise ConfigError(
                "not running in a cluster: KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT unset"
            )
        sa = Path(service_account_dir)
        token, ca = sa / "token", sa / "ca.crt"
        if not token.is_file():
            raise ConfigError(f"in-cluster service-account token {token} is missing")
        host = f"[{host}]" if ":" in host else host
        kwargs: dict[str, Any] = {"token_file": token}
        if ca.is_file():
            kwargs["ca_file"] = ca
        ns_file = sa / "namespace"
        if ns_file.is_file():
            kwargs["namespace"] = ns_file.read_text().strip() or "default"
        return cls(f"https://{host}:{port}", **{**kwargs, **overrides})

    @classmethod
    def load(cls, context: str | None = None, **overrides: Any) -> Config:
        """kubeconfig if one exists (``$KUBECONFIG`` or ``~/.kube/config``), else in-cluster."""
        paths = default_paths()
        if any(p.exists() for p in paths) or context is not None:
            return cls.from_kubeconfig(None, context, **overrides)
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            return cls.in_cluster(**overrides)
        tried = os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise ConfigError(
            f"no Kubernetes configuration found: tried kubeconfig ({tried}: not found) and "
            "in-cluster (KUBERNETES_SERVICE_HOST unset)"
        )

    # -- use -----------------------------------------------------------------------------
    @property
    def session(self) -> requests.Session:
        return self.transport.session

    @property
    def mapper(self) -> RESTMapper:
        """REST mapping with discovery fallback (lazy; no request until a kind is unknown)."""
        if self._mapper is None:
            from cloudcoil_sync.client._internal.discovery import RESTMapper

            self._mapper = RESTMapper(self.transport)
        return self._mapper

    @overload
    def client(
        self, target: tuple[str, str, str], namespace: str | None = None
    ) -> ResourceClient[dict[str, Any]]: ...
    @overload
    def client(self, target: type[T], namespace: str | None = None) -> ResourceClient[T]: ...
    def client(self, target: Any, namespace: str | None = None) -> ResourceClient[Any]:
        """A client for a model class or a ``(group, version, plural)`` tuple (dicts)."""
        from cloudcoil_sync.client._internal.api import ResourceClient

        return ResourceClient(self, target, namespace=namespace)

    def close(self) -> None:
        """Close the connection pool and delete temporary credential files."""
        self.transport.close()
        self.auth.close()
        self._files.close()

    def __enter__(self) -> Config:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Config(server={self.server!r}, namespace={self.namespace!r})"
