"""kubeconfig loading: file lists merged as kubectl does, contexts, data and file forms.

Merge rule (kubectl ``clientcmd``): files are read in order; for clusters, users and contexts
the first file defining a name wins, and the first ``current-context`` set wins. Relative file
paths (certificates, token files, exec commands containing a ``/``) are resolved against the
directory of the file that defined the entry.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from cloudcoil_sync.client._internal.errors import ConfigError
from cloudcoil_sync.client._internal.exec_auth import ExecProvider

__all__ = ["default_paths", "load_kubeconfig"]


def default_paths() -> list[Path]:
    """``$KUBECONFIG`` entries (missing ones skipped when merging), else ``~/.kube/config``."""
    env = os.environ.get("KUBECONFIG", "")
    if env.strip():
        return [Path(p).expanduser() for p in env.split(os.pathsep) if p.strip()]
    home = Path("~/.kube/config").expanduser()
    return [home] if home.exists() else []


def _read(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read kubeconfig {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"kubeconfig {path} is not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"kubeconfig {path} is not a mapping")
    return data


def _resolve(base: Path, value: Any) -> str:
    path = Path(str(value)).expanduser()
    return str(path if path.is_absolute() else base / path)


_PATH_FIELDS = {
    "cluster": ("certificate-authority",),
    "user": ("client-certificate", "client-key", "tokenFile"),
}


def _entries(
    data: dict[str, Any], section: str, key: str, path: Path
) -> list[tuple[str, dict[str, Any]]]:
    raw = data.get(section) or []
    if not isinstance(raw, list):
        raise ConfigError(f"kubeconfig {path}: {section} must be a list")
    out = []
    for item in raw:
        if not isinstance(item, dict) or "name" not in item:
            raise ConfigError(f"kubeconfig {path}: an entry of {section} has no name")
        body = dict(item.get(key) or {})
        for field in _PATH_FIELDS.get(key, ()):
            if body.get(field):
                body[field] = _resolve(path.parent, body[field])
        exec_spec = body.get("exec")
        if key == "user" and isinstance(exec_spec, dict):
            command = str(exec_spec.get("command") or "")
            if os.sep in command and not os.path.isabs(command):
                body["exec"] = {**exec_spec, "command": _resolve(path.parent, command)}
        out.append((str(item["name"]), body))
    return out


def merge(paths: Sequence[Path]) -> dict[str, Any]:
    """Merge kubeconfig files; missing files in a list are skipped (as kubectl does)."""
    merged: dict[str, Any] = {"clusters": {}, "users": {}, "contexts": {}, "current": None}
    found = [p for p in paths if p.exists()]
    if not found:
        raise ConfigError(
            "no kubeconfig file found (tried " + ", ".join(str(p) for p in paths) + ")"
            if paths
            else "no kubeconfig file found (KUBECONFIG unset and ~/.kube/config missing)"
        )
    for path in found:
        data = _read(path)
        for section, key in (("clusters", "cluster"), ("users", "user"), ("contexts", "context")):
            for name, body in _entries(data, section, key, path):
                merged[section].setdefault(name, body)
        if merged["current"] is None and data.get("current-context"):
            merged["current"] = str(data["current-context"])
    merged["files"] = [str(p) for p in found]
    return merged


def _b64(value: Any, what: str) -> bytes:
    try:
        return base64.b64decode("".join(str(value).split()), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(f"kubeconfig {what} is not valid base64") from None


def load_kubeconfig(
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
    context: str | None = None,
) -> dict[str, Any]:
    """Keyword arguments for :class:`~.config.Config` from kubeconfig."""
    if path is None:
        paths = default_paths()
    elif isinstance(path, str | os.PathLike):
        paths = [Path(p).expanduser() for p in str(path).split(os.pathsep) if p]
    else:
        paths = [Path(p).expanduser() for p in path]
    name, cluster, user_name, user, namespace = _resolve_context(merge(paths), context)
    kwargs: dict[str, Any] = {
        "server": str(cluster["server"]),
        "namespace": namespace,
        "insecure_skip_tls_verify": bool(cluster.get("insecure-skip-tls-verify", False)),
        "proxy_url": cluster.get("proxy-url"),
        "tls_server_name": cluster.get("tls-server-name"),
        "ca_file": cluster.get("certificate-authority"),
        "client_cert_file": user.get("client-certificate"),
        "client_key_file": user.get("client-key"),
        "token": user.get("token"),
        "token_file": user.get("tokenFile"),
    }
    for field, arg in (
        ("certificate-authority-data", "ca_data"),
        ("client-certificate-data", "client_cert_data"),
        ("client-key-data", "client_key_data"),
    ):
        source = cluster if field.startswith("certificate") else user
        if source.get(field):
            kwargs[arg] = _b64(source[field], f"{field} of context {name!r}")
    _check_user(user_name, user)
    if user.get("exec"):
        kwargs["exec_provider"] = ExecProvider.from_kubeconfig(
            user["exec"], cluster=_cluster_info(cluster)
        )
    return {k: v for k, v in kwargs.items() if v is not None}


def _resolve_context(
    merged: dict[str, Any], context: str | None
) -> tuple[str, dict[str, Any], str | None, dict[str, Any], str]:
    """(context name, its cluster, user name, user, namespace) of the chosen context."""
    where = ", ".join(merged["files"])
    name = context or merged["current"]
    if not name:
        raise ConfigError(f"kubeconfig ({where}) has no current-context and none was given")
    ctx = merged["contexts"].get(name)
    if ctx is None:
        known = ", ".join(sorted(merged["contexts"])) or "none"
        raise ConfigError(f"context {name!r} not found in kubeconfig ({where}); known: {known}")
    cluster = merged["clusters"].get(ctx.get("cluster"))
    if cluster is None:
        raise ConfigError(f"context {name!r} refers to unknown cluster {ctx.get('cluster')!r}")
    user_name = ctx.get("user")
    user = merged["users"].get(user_name, {}) if user_name else {}
    if user_name and user_name not in merged["users"]:
        raise ConfigError(f"context {name!r} refers to unknown user {user_name!r}")
    if not cluster.get("server"):
        raise ConfigError(f"cluster {ctx.get('cluster')!r} in kubeconfig has no server")
    return name, cluster, user_name, user, str(ctx.get("namespace") or "default")


def _check_user(user_name: str | None, user: Mapping[str, Any]) -> None:
    """Refuse the authentication methods Config does not support, naming what to use."""
    if user.get("auth-provider"):
        provider = (user["auth-provider"] or {}).get("name", "?")
        raise ConfigError(
            f"user {user_name!r} uses auth-provider {provider!r}, which is not supported; "
            "use an exec credential plugin"
        )
    if user.get("username") or user.get("password"):
        raise ConfigError(
            f"user {user_name!r} uses basic auth (username/password), which Kubernetes "
            "removed in 1.19; use a token, client certificate or exec plugin"
        )


def _cluster_info(cluster: Mapping[str, Any]) -> dict[str, Any]:
    """The ExecCredential ``spec.cluster`` for plugins with ``provideClusterInfo``."""
    info: dict[str, Any] = {"server": cluster.get("server")}
    for src, dst in (
        ("certificate-authority-data", "certificateAuthorityData"),
        ("insecure-skip-tls-verify", "insecureSkipTLSVerify"),
        ("proxy-url", "proxyURL"),
        ("tls-server-name", "tlsServerName"),
    ):
        if cluster.get(src) is not None:
            info[dst] = cluster[src]
    ext = cluster.get("extensions") or []
    for item in ext if isinstance(ext, list) else []:
        if isinstance(item, dict) and item.get("name") == "client.authentication.k8s.io/exec":
            info["config"] = item.get("extension")
    return info
