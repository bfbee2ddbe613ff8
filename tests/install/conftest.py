"""Fixtures: an emulator with the operator namespace and Deployment rollouts simulated, the
gadget operator definition, and kubeconfig files for the command line."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from cloudcoil_sync.application import Application
from cloudcoil_sync.application._internal.progress import Progress
from cloudcoil_sync.client import Config
from cloudcoil_sync.testing import Emulator

from .apps import NAMESPACE, gadgets

#: Test modules set this marker: Deployments become available as soon as they are applied.
ROLLOUTS = pytest.mark.kube_emulator(deployments="available")


@pytest.fixture
def kube(kube_emulator: Emulator) -> Emulator:
    """The emulator (rollouts simulated unless a test's marker says otherwise) with the
    operator's namespace."""
    kube_emulator.create_object(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    )
    return kube_emulator


@pytest.fixture
def config(kube: Emulator) -> Iterator[Config]:
    """An admin Config for the operator namespace."""
    with kube.config(namespace=NAMESPACE) as cfg:
        yield cfg


@pytest.fixture
def app(kube: Emulator) -> Application:
    """The gadget operator with webhooks (trusting the emulator's CA as a stand-in)."""
    return gadgets(kube.ca_pem)


class Lines:
    """A text stream that records progress lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def write(self, text: str) -> int:
        self.lines.extend(text.splitlines())
        return len(text)

    def flush(self) -> None:
        pass


@pytest.fixture
def lines() -> Lines:
    return Lines()


@pytest.fixture
def progress(lines: Lines) -> Progress:
    return Progress(lines)  # type: ignore[arg-type]


def write_kubeconfig(path: Path, server: str, token: str, ca_pem: bytes) -> Path:
    """A kubeconfig with one context (namespace ``operators``) for ``server``."""
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "emulator",
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                },
            }
        ],
        "users": [{"name": "installer", "user": {"token": token}}],
        "contexts": [
            {
                "name": "emulator",
                "context": {"cluster": "emulator", "user": "installer", "namespace": NAMESPACE},
            }
        ],
        "current-context": "emulator",
    }
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.fixture
def kubeconfig(kube: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An admin kubeconfig for the emulator, exported as $KUBECONFIG."""
    path = write_kubeconfig(tmp_path / "kubeconfig", kube.url, kube.admin_token, kube.ca_pem)
    monkeypatch.setenv("KUBECONFIG", str(path))
    return path
