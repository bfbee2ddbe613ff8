"""Offline checks of TLS material, so bad certificates fail at construction with a clear error."""

from __future__ import annotations

import ssl

from cloudcoil_sync.client._internal.errors import ConfigError

__all__ = ["check_ca", "check_pair", "pem_text"]


def pem_text(data: bytes | str) -> str:
    """PEM as text."""
    return data.decode() if isinstance(data, bytes) else data


def check_ca(ca_data: bytes | str | None, ca_file: str | None) -> None:
    """Raise ConfigError unless the CA data/file holds valid PEM certificates."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        if ca_data is not None:
            ctx.load_verify_locations(cadata=pem_text(ca_data))
        if ca_file is not None:
            ctx.load_verify_locations(cafile=ca_file)
    except (ssl.SSLError, ValueError, UnicodeDecodeError) as exc:
        what = "certificate-authority data" if ca_data is not None else f"CA file {ca_file}"
        raise ConfigError(f"{what} is not a valid PEM certificate: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read CA file {ca_file}: {exc.strerror}") from None


def check_pair(cert: str, key: str) -> None:
    """Raise ConfigError unless the client certificate and key files load and match."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        ctx.load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        raise ConfigError(f"client certificate/key are invalid or do not match: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read client certificate/key: {exc}") from None
