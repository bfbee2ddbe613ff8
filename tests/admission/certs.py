"""Test certificates: a CA and EC serving certificates for loopback, written to files."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cloudcoil_sync.testing._internal import tls

__all__ = ["CertificateAuthority", "ServingPair"]


@dataclass
class ServingPair:
    certfile: Path
    keyfile: Path
    serial: int


class CertificateAuthority:
    """The emulator's CA, issuing a fresh serving certificate (new key, new serial) per call."""

    def __init__(self, name: str = "cloudcoil-test-ca") -> None:
        self._ca = tls.CertificateAuthority(name)

    @property
    def pem(self) -> bytes:
        return self._ca.cert_pem

    def issue(self, directory: Path, *, name: str = "localhost") -> ServingPair:
        """Write tls.crt / tls.key for `name` and 127.0.0.1 (atomically, like a Secret volume)."""
        serving = self._ca.issue((name, "127.0.0.1"), cache=False)
        directory.mkdir(parents=True, exist_ok=True)
        certfile, keyfile = directory / "tls.crt", directory / "tls.key"
        _write(certfile, serving.cert_pem)
        _write(keyfile, serving.key_pem)
        return ServingPair(certfile, keyfile, serving.serial)


def _write(path: Path, data: bytes) -> None:
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)
