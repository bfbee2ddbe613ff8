"""Private temporary files for credentials (client certificates, keys, CA bundles)."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import weakref
from collections.abc import Callable

__all__ = ["PrivateFiles"]


class PrivateFiles:
    """A 0700 temporary directory of 0600 files, removed by :meth:`close` (or at exit)."""

    def __init__(self, prefix: str = "cloudcoil-sync-") -> None:
        self._prefix = prefix
        self._dir: str | None = None
        self._lock = threading.Lock()
        self._finalizer: Callable[[], object] | None = None  # a weakref.finalize

    def write(self, name: str, data: bytes) -> str:
        """Write ``data`` to a private file and return its path."""
        with self._lock:
            if self._dir is None:
                self._dir = tempfile.mkdtemp(prefix=self._prefix)
                self._finalizer = weakref.finalize(self, shutil.rmtree, self._dir, True)
            path = os.path.join(self._dir, name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            return path

    @property
    def directory(self) -> str | None:
        return self._dir

    def close(self) -> None:
        with self._lock:
            if self._finalizer is not None:
                self._finalizer()
            self._dir = None
            self._finalizer = None
