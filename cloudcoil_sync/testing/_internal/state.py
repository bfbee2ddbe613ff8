"""Saving an emulator's objects and tokens to a JSON file, and loading them into a new one.

The file holds every stored object with its storage key, the resourceVersion counter, the
port, the CA (certificate and key) and the admin token and tokens handed out
(``service_account_token``, TokenRequest, ``add_token``), so that a kubeconfig or token written
before a restart keeps working. It is written readable by its owner only. The watch history is not
saved: a watch from an earlier resourceVersion gets 410 Expired, as after an etcd restore.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import TYPE_CHECKING, Any

from cloudcoil_sync.testing._internal.tls import CertificateAuthority

if TYPE_CHECKING:
    from cloudcoil_sync.testing._internal.backend import Backend

__all__ = [
    "FORMAT",
    "StateError",
    "apply_state",
    "read_state",
    "save_state",
    "saved_options",
    "snapshot",
]

JSON = dict[str, Any]
FORMAT = "cloudcoil-sync.emulator/v1"
_CRD_KEY = ("apiextensions.k8s.io", "customresourcedefinitions")


class StateError(ValueError):
    """A state file that cannot be read or is not an emulator state."""


def snapshot(emu: Backend) -> JSON:
    """The emulator's state as JSON data."""
    with emu.store.lock:
        objects = [
            {"group": key[0], "resource": key[1], "object": obj}
            for key, obj in emu.store.all_objects()
        ]
        rv = emu.store.resource_version
    tokens = [
        {"token": token, "user": user.name, "groups": list(user.groups)}
        for token, user in emu.authorizer.tokens().items()
    ]
    ca = emu.ca
    return {
        "format": FORMAT,
        "resourceVersion": rv,
        "port": emu.port,
        "ca": {"cert": ca.cert_pem.decode(), "key": ca.key_pem.decode()} if ca else None,
        "adminToken": emu.admin_token,
        "tokens": tokens,
        "objects": objects,
    }


def save_state(emu: Backend, path: str) -> list[str]:
    """Write the emulator's state to ``path`` atomically (a temporary file renamed over it,
    owner-only: it holds tokens); an object that cannot be encoded is left out rather than
    losing the rest. Returns what was left out (``group/resource namespace/name: why``)."""
    state = snapshot(emu)
    objects, skipped = [], []
    for entry in state.pop("objects"):
        try:
            objects.append(json.dumps(entry, separators=(",", ":"), allow_nan=False))
        except (TypeError, ValueError) as exc:
            meta = entry["object"].get("metadata") or {}
            where = f"{meta.get('namespace', '')}/{meta.get('name', '')}".lstrip("/")
            skipped.append(f"{entry['group']}/{entry['resource']} {where}: {exc}")
    head = json.dumps(state, separators=(",", ":"))[:-1]  # the object, still open
    data = f'{head},"objects":[{",".join(objects)}]}}'.encode()
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".state-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())  # on disk before it replaces the previous state
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return skipped


def read_state(path: str) -> JSON:
    """The state in ``path``; ``StateError`` naming what is wrong with it."""
    try:
        with open(path, "rb") as stream:
            data = json.loads(stream.read())
    except OSError as exc:
        raise StateError(f"cannot read state file {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise StateError(f"state file {path} is not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise StateError(f"{path} is not an emulator state file (format {FORMAT!r} expected)")
    objects = data.get("objects")
    if not isinstance(objects, list) or not all(_is_entry(e) for e in objects):
        raise StateError(
            f"state file {path}: objects must be a list of {{group, resource, object}}"
        )
    if not isinstance(data.get("adminToken"), str) or not isinstance(data.get("tokens"), list):
        raise StateError(f"state file {path}: adminToken and tokens are required")
    return data


def _is_entry(entry: Any) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("group"), str)
        and isinstance(entry.get("resource"), str)
        and isinstance(entry.get("object"), dict)
        and isinstance(entry["object"].get("metadata"), dict)
        and isinstance(entry["object"]["metadata"].get("name"), str)
    )


def saved_options(data: JSON) -> JSON:
    """``Emulator`` keyword arguments from a state: admin token, port and CA."""
    options: JSON = {"admin_token": data["adminToken"]}
    port = data.get("port")
    if isinstance(port, int) and 0 < port < 65536:
        options["port"] = port
    ca = data.get("ca")
    if ca:
        try:
            options["ca"] = CertificateAuthority(pem=(ca["cert"].encode(), ca["key"].encode()))
        except (TypeError, KeyError, AttributeError, ValueError) as exc:
            raise StateError(f"the saved CA cannot be loaded: {exc}") from None
    return options


def apply_state(emu: Backend, data: JSON) -> None:
    """Load ``data`` (from :func:`read_state`) into ``emu`` before it starts.

    The emulator must have been built with ``admin_token=data["adminToken"]``.
    """
    if emu.admin_token != data["adminToken"]:
        raise StateError("the emulator's admin token differs from the saved one")
    entries = sorted(data["objects"], key=lambda e: (e["group"], e["resource"]) != _CRD_KEY)
    for entry in entries:
        key = (entry["group"], entry["resource"])
        if key == _CRD_KEY:
            emu.registry.add_crd(entry["object"])
        emu.store.restore(key, entry["object"])
    for item in data["tokens"]:
        emu.add_token(item["token"], item["user"], item.get("groups") or [])
