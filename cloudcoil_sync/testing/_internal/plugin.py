"""pytest plugin (registered through the ``pytest11`` entry point ``cloudcoil_sync``).

Fixtures:

- ``kube_emulator``: a started :class:`~cloudcoil_sync.testing.Emulator` (HTTPS), one per test.
- ``kube_config``: a ``cloudcoil_sync.client.Config`` for it (admin token, namespace default).

Emulator options per test: ``@pytest.mark.kube_emulator(tls=False, history_size=100, ...)``
(keyword arguments of :class:`~cloudcoil_sync.testing.Emulator`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from cloudcoil_sync.testing._internal.emulator import Emulator

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config

__all__ = ["kube_config", "kube_emulator"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "kube_emulator(**options): options for the kube_emulator fixture's Emulator"
    )


@pytest.fixture
def kube_emulator(request: pytest.FixtureRequest) -> Iterator[Emulator]:
    """A Kubernetes API emulator over HTTPS on loopback, stopped after the test."""
    marker = request.node.get_closest_marker("kube_emulator")
    options: dict[str, Any] = dict(marker.kwargs) if marker else {}
    with Emulator(**options) as emulator:
        yield emulator


@pytest.fixture
def kube_config(kube_emulator: Emulator) -> Iterator[Config]:
    """Client configuration for ``kube_emulator`` (admin token, namespace ``default``).

    Its connection pool is closed after the test.
    """
    config = kube_emulator.config()
    yield config
    config.close()
