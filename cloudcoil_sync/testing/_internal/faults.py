"""Fault injection: canned error responses, latency, dropped watches, lost history."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field

from cloudcoil_sync.testing._internal.status import ApiError

__all__ = ["Faults", "InjectedFault"]

_REASONS = {
    429: "TooManyRequests",
    500: "InternalError",
    502: "BadGateway",
    503: "ServiceUnavailable",
    504: "Timeout",
    409: "Conflict",
    410: "Expired",
}


@dataclass
class InjectedFault:
    status: int
    remaining: int
    method: str | None = None
    path: re.Pattern[str] | None = None
    retry_after: int | None = None
    message: str = ""

    def matches(self, method: str, path: str) -> bool:
        if self.method and self.method.upper() != method:
            return False
        return not self.path or bool(self.path.search(path))

    def error(self) -> ApiError:
        reason = _REASONS.get(self.status, "InternalError")
        message = self.message or f"injected fault: {self.status} {reason}"
        headers = {"Retry-After": str(self.retry_after)} if self.retry_after is not None else {}
        details = {"retryAfterSeconds": self.retry_after} if self.retry_after is not None else {}
        return ApiError(self.status, reason, message, details, headers)


@dataclass
class _Latency:
    seconds: float
    method: str | None
    path: re.Pattern[str] | None


@dataclass
class Faults:
    """Test-controlled failures, consulted by the HTTP layer before every request."""

    _lock: threading.Lock = field(default_factory=threading.Lock)
    _faults: list[InjectedFault] = field(default_factory=list)
    _latency: list[_Latency] = field(default_factory=list)
    injected: int = 0

    def inject(
        self,
        status: int,
        count: int = 1,
        method: str | None = None,
        path: str | None = None,
        retry_after: int | None = None,
        message: str = "",
    ) -> InjectedFault:
        """Answer the next ``count`` matching requests with ``status`` (``path`` is a regex)."""
        fault = InjectedFault(
            status, count, method, re.compile(path) if path else None, retry_after, message
        )
        with self._lock:
            self._faults.append(fault)
        return fault

    def add_latency(
        self, seconds: float, method: str | None = None, path: str | None = None
    ) -> None:
        """Delay every matching request by ``seconds`` until ``clear()``."""
        with self._lock:
            self._latency.append(_Latency(seconds, method, re.compile(path) if path else None))

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()
            self._latency.clear()

    def take(self, method: str, path: str) -> tuple[ApiError | None, float]:
        """The injected error for this request (consuming one) and the delay to add."""
        delay = 0.0
        with self._lock:
            for lat in self._latency:
                if (not lat.method or lat.method.upper() == method) and (
                    not lat.path or lat.path.search(path)
                ):
                    delay += lat.seconds
            for fault in self._faults:
                if fault.remaining > 0 and fault.matches(method, path):
                    fault.remaining -= 1
                    self.injected += 1
                    if fault.remaining == 0:
                        self._faults.remove(fault)
                    return fault.error(), delay
        return None, delay
