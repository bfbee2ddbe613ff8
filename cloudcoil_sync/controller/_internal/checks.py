"""Named health checks behind `/healthz` and `/readyz`, shown as kube-apiserver shows them.

`HealthChecks` holds the framework's checks (`ping`, `controllers`, `informer-sync`,
`webhook-certificate`) and the user's (`@app.health_check()`). `/readyz?verbose` (or
`/healthz?verbose`) lists each as `[+]name ok` or `[-]name failed: reason withheld` (the
reason is logged, not served) and ends in `readyz check passed|failed`; `?exclude=name`
leaves a check out; `/readyz/<name>` answers one check. Without `verbose` the answers stay
`ok` and `not ready` / `unhealthy`. Failing answers are 503.

A user check runs on a thread of its own, bounded by its `timeout` (a check still running
at its timeout fails, and is not started again until it returns), and its result is kept
for its `period`: a check that starts failing turns `/readyz` false within one period.
Framework checks are quick reads, evaluated at each probe.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from cloudcoil_sync._internal.numbers import is_number

__all__ = ["Check", "HealthChecks", "certificate_check", "serve_checks"]

logger = logging.getLogger("cloudcoil_sync.controller.health")

Probe = Callable[[], bool]
_ENDPOINTS = {"/healthz": "healthz", "/readyz": "readyz"}
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")


@dataclass
class Check:
    """One named check; `fn()` returns truthy when fine (or raises / returns falsy)."""

    name: str
    fn: Callable[[], object]
    liveness: bool = False
    readiness: bool = True
    timeout: float | None = None  # None: a quick framework check, run inline
    period: float = 0.0
    result: tuple[bool, str] | None = None
    checked: float = -math.inf
    running: threading.Thread | None = field(default=None, repr=False)


class HealthChecks:
    """The checks of one operator (see the module doc)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._checks: dict[str, Check] = {}
        self._lock = threading.Lock()
        self._clock = clock

    def add(
        self,
        name: str,
        fn: Callable[[], object],
        *,
        liveness: bool = False,
        readiness: bool = True,
        timeout: float | None = 5.0,
        period: float = 10.0,
    ) -> Check:
        """Register `fn` as `name` (lower case, digits and dashes, unique)."""
        if not name or not set(name) <= _NAME_CHARS:
            raise ValueError(
                f"Health check name {name!r} must be lower case letters, digits and dashes"
            )
        if name in self._checks:
            raise ValueError(f"Health check {name!r} is already registered")
        if not (liveness or readiness):
            raise ValueError(f"Health check {name!r} must be a liveness or readiness check")
        for label, value in (("timeout", timeout), ("period", period)):
            if value is not None and (not is_number(value) or value < 0):
                raise ValueError(f"Health check {name!r}: {label} must be a finite number >= 0")
        check = Check(name, fn, liveness, readiness, timeout, period)
        self._checks[name] = check
        return check

    def set_builtin(self, name: str, fn: Probe, *, liveness: bool, readiness: bool) -> None:
        """Add or replace a framework check (quick, evaluated at every probe)."""
        self._checks[name] = Check(name, fn, liveness, readiness, None, 0.0)

    def names(self, endpoint: str) -> list[str]:
        return [c.name for c in self._checks.values() if _serves(c, endpoint)]

    # -- answers -----------------------------------------------------------------------------

    def answer(self, path: str, query: str, base: Mapping[str, Probe]) -> tuple[int, bytes] | None:
        """(status, body) for `/healthz[/name]` or `/readyz[/name]`; None for other paths.

        `base` holds the server's own probe per endpoint (the `controllers` check)."""
        root, _, single = path.partition("/")[2].partition("/")
        endpoint = _ENDPOINTS.get(f"/{root}")
        if endpoint is None:
            return None
        options = parse_qs(query, keep_blank_values=True)
        checks = [
            Check("ping", _always, True, True, None),
            Check("controllers", base.get(f"/{root}", _always), True, True, None),
            *(c for c in self._checks.values() if _serves(c, endpoint)),
        ]
        if single:
            chosen = [c for c in checks if c.name == single]
            if not chosen:
                return 404, b"not found\n"
            ok, line = self._line(chosen[0])
            return (200, b"ok\n") if ok else (503, f"{line}\n".encode())
        excluded = set(options.get("exclude", []))
        lines, healthy = [], True
        for check in checks:
            if check.name in excluded:
                lines.append(f"[+]{check.name} excluded: ok")
                continue
            ok, line = self._line(check)
            healthy = healthy and ok
            lines.append(line)
        code = 200 if healthy else 503
        if "verbose" not in options:
            failed = b"unhealthy\n" if endpoint == "healthz" else b"not ready\n"
            return code, b"ok\n" if healthy else failed
        verdict = "passed" if healthy else "failed"
        return code, ("\n".join(lines) + f"\n{endpoint} check {verdict}\n").encode()

    def _line(self, check: Check) -> tuple[bool, str]:
        ok, _ = self._evaluate(check)  # the reason is logged, not served
        if ok:
            return True, f"[+]{check.name} ok"
        return False, f"[-]{check.name} failed: reason withheld"

    def _evaluate(self, check: Check) -> tuple[bool, str]:
        if check.timeout is None:
            return _run(check)
        now = self._clock()
        with self._lock:
            if check.result is not None and now - check.checked < check.period:
                return check.result
            running = check.running
            if running is None:
                running = check.running = threading.Thread(
                    target=self._run_async, args=(check,), name=f"health-check-{check.name}"
                )
                running.daemon = True
                running.start()
        running.join(check.timeout)
        with self._lock:
            if running.is_alive():
                result = (False, f"did not answer within {check.timeout:g}s")
                self._record(check, result, now)
            return check.result or (False, "not checked")

    def _run_async(self, check: Check) -> None:
        result = _run(check)
        with self._lock:
            self._record(check, result, self._clock())
            check.running = None

    def _record(self, check: Check, result: tuple[bool, str], when: float) -> None:
        previous = check.result
        check.result, check.checked = result, when
        if not result[0] and (previous is None or previous[0] or previous[1] != result[1]):
            logger.warning("Health check %s failed: %s", check.name, result[1])
        elif result[0] and previous is not None and not previous[0]:
            logger.info("Health check %s passes again", check.name)

    def close(self, timeout: float = 1.0) -> None:
        """Join the checks still running (bounded: a stuck check is left to end)."""
        give_up = time.monotonic() + timeout
        for check in list(self._checks.values()):
            running = check.running
            if running is not None:
                running.join(max(0.0, give_up - time.monotonic()))


def _serves(check: Check, endpoint: str) -> bool:
    return check.liveness if endpoint == "healthz" else check.readiness


def _always() -> bool:
    return True


def _run(check: Check) -> tuple[bool, str]:
    try:
        value = check.fn()
    except Exception as error:
        return False, f"{type(error).__name__}: {error}"
    return (True, "ok") if value or value is None else (False, "returned False")


def certificate_check(certfile: str, clock: Callable[[], float] = time.time) -> Probe:
    """A check that the serving certificate in `certfile` is valid now (re-read when the
    file changes): raises naming why not (expired, not yet valid, unreadable)."""
    from cryptography import x509

    seen: dict[str, Any] = {}

    def check() -> bool:
        try:
            stat = os.stat(certfile)
            signature = (stat.st_mtime_ns, stat.st_size)
            if seen.get("signature") != signature:
                with open(certfile, "rb") as handle:
                    certificate = x509.load_pem_x509_certificate(handle.read())
                seen["window"] = (
                    certificate.not_valid_before_utc.timestamp(),
                    certificate.not_valid_after_utc.timestamp(),
                )
                seen["signature"] = signature
        except (OSError, ValueError) as error:
            raise ValueError(f"cannot read {certfile}: {error}") from error
        start, end = seen["window"]
        now = clock()
        if now < start:
            raise ValueError(f"{certfile} is not valid before {_when(start)}")
        if now >= end:
            raise ValueError(f"{certfile} expired at {_when(end)}")
        return True

    return check


def _when(timestamp: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp))


def serve_checks(
    checks: HealthChecks,
    *,
    synced: Probe | None = None,
    certfile: str | None = None,
) -> None:
    """The framework's readiness checks: informers synced, the webhook's certificate valid."""
    if synced is not None:
        checks.set_builtin("informer-sync", synced, liveness=False, readiness=True)
    if certfile is not None:
        cert = certificate_check(certfile)
        checks.set_builtin("webhook-certificate", cert, liveness=False, readiness=True)
