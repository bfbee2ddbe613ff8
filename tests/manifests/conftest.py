"""Fixtures: a freshly generated CA certificate and its private key (PEM)."""

from __future__ import annotations

import pytest

from .certs import make_ca


@pytest.fixture(scope="session")
def ca_pair() -> tuple[bytes, bytes]:
    return make_ca()
