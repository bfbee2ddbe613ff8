"""Credential sources: static bearer token, token file (rotation), exec plugins.

Every source answers :meth:`Auth.authorization` (the ``Authorization`` header value or
``None``) and :meth:`Auth.client_cert` (client certificate/key file paths or ``None``), and
may drop cached credentials in :meth:`Auth.invalidate` after a 401.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from cloudcoil_sync.client._internal.errors import ConfigError

__all__ = ["Auth", "FileToken", "NoAuth", "StaticToken"]


class Auth:
    """No credentials (base class)."""

    def authorization(self) -> str | None:
        return None

    def client_cert(self) -> tuple[str, str] | None:
        return None

    def credentials(self) -> tuple[str | None, tuple[str, str] | None]:
        """Header value and client certificate for one request (one consistent snapshot)."""
        return self.authorization(), self.client_cert()

    def invalidate(self) -> bool:
        """Forget cached credentials after a 401; True if a retry may now succeed."""
        return False

    def close(self) -> None:
        """Release resources (temporary files)."""


NoAuth = Auth


class StaticToken(Auth):
    """A fixed bearer token."""

    def __init__(self, token: str) -> None:
        token = token.strip()
        if not token:
            raise ConfigError("empty bearer token")
        self._header = f"Bearer {token}"

    def authorization(self) -> str:
        return self._header


class FileToken(Auth):
    """A bearer token read from a file and re-read when the file changes.

    Bound service-account tokens are rotated by the kubelet (atomic symlink swap), so the file's
    identity (inode, mtime, size) is checked at most every ``check_interval`` seconds and the
    token re-read when it changed, and always after a 401.
    """

    def __init__(self, path: str | os.PathLike[str], *, check_interval: float = 1.0) -> None:
        self.path = Path(path)
        self.check_interval = check_interval
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._header = ""
        self._checked = 0.0
        self._reload(force=True)

    def _file_stamp(self) -> tuple[int, int, int]:
        st = self.path.stat()
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _reload(self, *, force: bool = False) -> bool:
        try:
            stamp = self._file_stamp()
            if not force and stamp == self._stamp:
                return False
            token = self.path.read_text().strip()
        except OSError as exc:
            if self._header and not force:
                return False  # keep the last good token through a rotation hiccup
            raise ConfigError(f"cannot read token file {self.path}: {exc.strerror}") from exc
        if not token:
            raise ConfigError(f"token file {self.path} is empty")
        changed = f"Bearer {token}" != self._header
        self._header, self._stamp = f"Bearer {token}", stamp
        return changed

    def authorization(self) -> str:
        now = time.monotonic()
        if now - self._checked >= self.check_interval:
            with self._lock:
                if now - self._checked >= self.check_interval:
                    self._reload()
                    self._checked = now
        return self._header

    def invalidate(self) -> bool:
        with self._lock:
            self._checked = time.monotonic()
            try:
                return self._reload(force=True)
            except ConfigError:
                return False
