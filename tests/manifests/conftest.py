"""Fixtures: a freshly generated CA certificate and its private key (PEM)."""

from __future__ import annotations

import pytest

import cloudcoil_sync.controller  # noqa: F401  (imports admission in a working order)

from .certs import make_ca


@pytest.fixture(scope="session")
def ca_pair() -> tuple[bytes, bytes]:
    return make_ca()
