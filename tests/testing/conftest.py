"""Shared helpers: a ``requests`` session that trusts the emulator's CA."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import requests

from cloudcoil_sync.testing import Emulator


class Client:
    """Plain requests against an emulator, admin token unless another is given."""

    def __init__(self, emulator: Emulator, ca_file: Path, token: str | None = None) -> None:
        self.emulator = emulator
        self.session = requests.Session()
        self.session.trust_env = False  # REQUESTS_CA_BUNDLE must not replace our CA
        self.session.verify = str(ca_file)
        self.session.headers["Authorization"] = f"Bearer {token or emulator.admin_token}"
        self.ca_file = ca_file

    def as_token(self, token: str) -> Client:
        return Client(self.emulator, self.ca_file, token)

    def request(self, method: str, path: str, **kw: Any) -> requests.Response:
        kw.setdefault("timeout", 10)
        return self.session.request(method, self.emulator.url + path, **kw)

    def get(self, path: str, **kw: Any) -> requests.Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, body: Any, **kw: Any) -> requests.Response:
        return self.request("POST", path, json=body, **kw)

    def put(self, path: str, body: Any, **kw: Any) -> requests.Response:
        return self.request("PUT", path, json=body, **kw)

    def delete(self, path: str, body: Any = None, **kw: Any) -> requests.Response:
        return self.request("DELETE", path, json=body, **kw)

    def patch(
        self, path: str, body: Any, ctype: str = "application/merge-patch+json", **kw: Any
    ) -> requests.Response:
        headers = {"Content-Type": ctype, **kw.pop("headers", {})}
        return self.request("PATCH", path, json=body, headers=headers, **kw)

    def close(self) -> None:
        self.session.close()


@pytest.fixture
def client(kube_emulator: Emulator, tmp_path: Path) -> Iterator[Client]:
    ca = tmp_path / "ca.crt"
    ca.write_bytes(kube_emulator.ca_pem)
    c = Client(kube_emulator, ca)
    yield c
    c.close()


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def replay_in_order(
    name: str, files: Sequence[str], done: set[str], replay: Callable[[str], None]
) -> None:
    """Replay `name` of recordings that build on each other, after every earlier one this
    emulator has not seen (`done`, which `replay` fills): pytest-xdist (worksteal) may give
    a worker a later file first, so no case depends on which worker ran what."""
    for earlier in files[: files.index(name)]:
        if earlier not in done:
            try:
                replay(earlier)
            except AssertionError as error:
                raise AssertionError(f"replaying the earlier {earlier}: {error}") from error
    replay(name)
