"""pytest plugin (registered through the ``pytest11`` entry point ``cloudcoil_sync``).

Fixtures:

- ``kube_emulator``: a started :class:`~cloudcoil_sync.testing.Emulator` (HTTPS), one per test.
- ``kube_config``: a ``cloudcoil_sync.client.Config`` for it (admin token, namespace default).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from .emulator import Emulator

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config

__all__ = ["kube_config", "kube_emulator"]


@pytest.fixture
def kube_emulator() -> Iterator[Emulator]:
    """A Kubernetes API emulator over HTTPS on loopback, stopped after the test."""
    with Emulator() as emulator:
        yield emulator


@pytest.fixture
def kube_config(kube_emulator: Emulator) -> Config:
    """Client configuration for ``kube_emulator`` (admin token, namespace ``default``)."""
    return kube_emulator.config()
