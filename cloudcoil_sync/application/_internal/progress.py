"""Progress, deadlines and outcome errors shared by ``install`` and ``uninstall``.

Progress goes to stderr, one line per step (``applied ...``, ``waiting for ...: <state>``,
``... done in N s``) and one summary line; waits print a state only when it changes. Failures
raise :class:`InstallError` (or its subclasses), whose one-line message names the cause, what
was done and what was still pending; nothing is rolled back.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from cloudcoil_sync._internal.numbers import is_number

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config

__all__ = [
    "InstallConflict",
    "InstallError",
    "InstallTimeout",
    "Operation",
    "OperationDeadline",
    "Progress",
    "Steps",
    "describe",
    "field_manager",
]

#: Seconds between polls of a condition (the reference's 0.2 s).
POLL_INTERVAL = 0.2


def field_manager(app_name: str) -> str:
    """The server-side-apply field manager of an app's installer."""
    return f"cloudcoil-{app_name}"


def describe(obj: dict[str, Any]) -> str:
    """``Kind namespace/name`` (or ``Kind name`` for cluster-scoped objects)."""
    meta = obj.get("metadata") or {}
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj.get('kind', '?')} {where}{meta.get('name', '?')}"


def _names(items: Sequence[str], limit: int = 4) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


class InstallError(RuntimeError):
    """An install/uninstall step failed; objects already written are left in place."""

    def __init__(
        self, cause: str, *, done: Sequence[str] = (), pending: Sequence[str] = (), verb: str = ""
    ) -> None:
        self.cause = cause
        self.done = list(done)
        self.pending = list(pending)
        tail = []
        if verb and not self.done:
            tail.append(f"nothing {verb}")
        elif verb:
            tail.append(f"{verb} {len(self.done)} of {len(self.done) + len(self.pending)}")
        if self.pending and self.done:
            tail.append(f"pending: {_names(self.pending)}")
        super().__init__(cause + (f" ({'; '.join(tail)})" if tail else ""))


class InstallTimeout(InstallError, TimeoutError):
    """The overall ``timeout`` expired; ``cause`` names what was being waited for."""


class InstallConflict(InstallError):
    """Server-side apply found fields owned by another field manager."""

    def __init__(self, obj: str, manager: str, field: str, others: int, **kw: Any) -> None:
        self.object, self.manager, self.field = obj, manager, field
        more = f" (and {others} more)" if others else ""
        cause = (
            f"{obj}: field {field}{more} is owned by field manager {manager!r}; "
            "rerun with --force (force=True) to take ownership"
        )
        super().__init__(cause, **kw)


class OperationDeadline:
    """A monotonic deadline for a whole operation."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self._end = clock() + seconds

    def remaining(self) -> float:
        return max(0.0, self._end - self._clock())

    @property
    def expired(self) -> bool:
        return self.remaining() <= 0.0

    def sleep(self, interval: float = POLL_INTERVAL) -> None:
        """Sleep ``interval``, never past the deadline."""
        # A poll, on purpose (docs/architecture.md, "What polls and why"): a one-shot CLI
        # reading a few objects again; a watch per object would save requests, not time.
        time.sleep(min(interval, self.remaining()))


class Progress:
    """Writes progress lines to ``stream`` (stderr) unless ``quiet``."""

    def __init__(self, stream: TextIO | None = None, *, quiet: bool = False) -> None:
        self._stream = stream
        self.quiet = quiet
        self.started = time.monotonic()
        self._state: tuple[str, str] | None = None

    def line(self, text: str) -> None:
        if not self.quiet:
            stream = self._stream or sys.stderr
            stream.write(text + "\n")
            stream.flush()

    def waiting(self, what: str, state: str) -> None:
        """Report a wait's state when it differs from the last one reported."""
        if self._state != (what, state):
            self._state = (what, state)
            self.line(f"waiting for {what}: {state}")

    def done(self, what: str, since: float) -> None:
        self._state = None
        self.line(f"{what}: done in {time.monotonic() - since:.1f} s")

    def elapsed(self) -> float:
        return time.monotonic() - self.started


@dataclass(frozen=True)
class Operation:
    """How one ``install`` or ``uninstall`` runs: within ``timeout`` seconds, as a server-side
    ``dry_run`` or for real, with the caller's ``config`` (None: one is loaded for it and closed
    after), reporting to ``progress`` (None: stderr)."""

    timeout: float = 120.0
    dry_run: bool = False
    config: Config | None = None
    progress: Progress | None = None

    def check(self, what: str) -> None:
        """``ValueError`` unless ``timeout`` is a finite, positive number of seconds."""
        timeout = self.timeout
        if not (is_number(timeout) and timeout > 0):
            raise ValueError(f"{what} timeout must be finite and positive")

    @contextmanager
    def connection(self, namespace: str) -> Iterator[Config]:
        """``config``, or one loaded for this operation (no single request outlives it: kubeconfig
        or in-cluster) and closed after it."""
        if self.config is not None:
            yield self.config
            return
        from cloudcoil_sync.client import Config

        loaded = Config.load(namespace=namespace, timeout=min(30.0, self.timeout), max_retries=3)
        try:
            yield loaded
        finally:
            loaded.close()

    def deadline(self) -> OperationDeadline:
        return OperationDeadline(self.timeout)

    def reporter(self) -> Progress:
        return Progress() if self.progress is None else self.progress


class Steps:
    """One pass over documents: what was done and what is pending, for every error message."""

    #: Past participle naming the step in messages ("applied 3 of 8").
    verb = "applied"

    def __init__(self, config: Config, manager: str, operation: Operation) -> None:
        self.config = config
        self.manager = manager
        self.deadline = operation.deadline()  # from now: the connection is made
        self.progress = operation.reporter()
        self.dry_run = operation.dry_run
        self.done: list[str] = []
        self.pending: list[str] = []

    def fail(self, cause: str, kind: type[InstallError] = InstallError) -> InstallError:
        return kind(cause, done=self.done, pending=self.pending, verb=self.verb)

    def begin(self, documents: Sequence[dict[str, Any]]) -> None:
        self.pending = [describe(d) for d in documents]

    def finished(self, what: str) -> None:
        self.pending.remove(what)
        self.done.append(what)

    def timed_out(self, where: str) -> str:
        return f"timed out after {self.deadline.seconds:g} s {where}"

    def wait(self, what: str, label: str, poll: Callable[[], tuple[bool, str]]) -> None:
        """Poll until ``poll()`` says ``what`` is ``label`` (``(done, state)``), reporting each
        new state; `InstallTimeout` once the deadline passes."""
        since = time.monotonic()
        while True:
            done, state = poll()
            if done:
                self.progress.done(f"{what} is {label}", since)
                return
            self.progress.waiting(f"{what} to be {label}", state)
            if self.deadline.expired:
                where = f"waiting for {what} to be {label} ({state})"
                raise self.fail(self.timed_out(where), InstallTimeout)
            self.deadline.sleep()
