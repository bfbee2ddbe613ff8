"""Per-object daemons and timers (`@controller.daemon()`, `@controller.timer(...)`).

A daemon is a function `(resource, stop)` run on a thread of its own for each object of
the primary kind while the object exists (kopf's `@kopf.daemon`): `stop`, a `DaemonStop`
(a `threading.Event`), is set when the object is deleted (or marked for deletion), when the
operator loses leadership and when it stops; the daemon should wait on it
(`stop.wait(seconds)`) rather than sleep, and read `stop.latest()` for the object as it is
now (kopf's live body). If it raises, it is logged and started again after `retry` seconds;
if it returns, it is done for that object until the operator restarts.

A timer is a function `(resource)` called every `interval` seconds per object, after
`initial_delay`, with the latest cached version of the object; with `idle`, only once the
object has not changed for `idle` seconds (kopf's `@kopf.timer`). A raising timer is logged
and called again at its next tick. Each timer of each object also runs on a thread of its
own (waiting on its stop event between ticks).

Both are leader work: threads start only while the controller's workers run and its term
admits passes; their writes go through a fence under the term's (refused once leadership is
lost or the operator stops, as a pass's); a sharded replica only sees its own share. Threads
are bounded per controller (`max_threads`): objects beyond it wait, first come first
served, for a thread to end. Stopping sets every stop event and waits for the threads
within the controller's `shutdown_timeout`; a thread still running then has its fence closed.
`cloudcoil_object_threads{controller,handler}` counts the running threads and
`cloudcoil_object_handler_errors_total{controller,handler}` the calls that raised.
"""

from __future__ import annotations

import collections
import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cloudcoil.resources import Resource

from cloudcoil_sync._internal.callables import function_name
from cloudcoil_sync.client import fenced
from cloudcoil_sync.controller._internal.fence import WriteFence
from cloudcoil_sync.controller._internal.invalid import InvalidObject, build
from cloudcoil_sync.controller._internal.store import ObjectKey, object_key
from cloudcoil_sync.controller._internal.term import Term

__all__ = ["DEFAULT_MAX_THREADS", "Daemon", "DaemonStop", "ObjectThreads", "Timer"]

JSON = dict[str, Any]
DEFAULT_MAX_THREADS = 256


class DaemonStop(threading.Event):
    """The event a daemon is given: set when it must end (wait on it instead of sleeping).

    `latest()` is the object as the cache has it now, built fresh on each call (the daemon's
    `resource` argument stays the version it started with); None once the object is gone,
    marked for deletion, or does not fit the model (a warning says why).
    """

    def __init__(self, latest: Callable[[], Any | None]) -> None:
        super().__init__()
        self._latest = latest

    def latest(self) -> Any | None:
        return self._latest()


@dataclass(frozen=True)
class Daemon:
    function: Callable[[Any, threading.Event], Any]
    retry: float = 10.0

    @property
    def name(self) -> str:
        return str(getattr(self.function, "__name__", None) or function_name(self.function))


@dataclass(frozen=True)
class Timer:
    function: Callable[[Any], Any]
    interval: float
    initial_delay: float = 0.0
    idle: float | None = None

    @property
    def name(self) -> str:
        return str(getattr(self.function, "__name__", None) or function_name(self.function))


Spec = Daemon | Timer


@dataclass
class _Run:
    spec: Spec
    key: ObjectKey
    stop: DaemonStop
    fence: WriteFence
    thread: threading.Thread | None = None


class ObjectThreads:
    """The daemons and timers of one controller: a thread per (object, handler)."""

    def __init__(
        self,
        resource: type[Resource],
        specs: tuple[Spec, ...],
        *,
        term: Term,
        log: logging.Logger,
        count: Callable[[str, int], None],
        failed: Callable[[str], None],
        max_threads: int = DEFAULT_MAX_THREADS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`count(handler, +1/-1)` tracks running threads, `failed(handler)` raised calls."""
        self._resource, self._specs, self._term, self._log = resource, specs, term, log
        self._count, self._failed = count, failed
        self._max, self._clock = max_threads, clock
        self._lock = threading.Lock()
        self._objects: dict[ObjectKey, tuple[JSON, float]] = {}  # latest, changed at
        self._runs: dict[tuple[ObjectKey, int], _Run] = {}
        self._waiting: collections.OrderedDict[tuple[ObjectKey, int], None]
        self._waiting = collections.OrderedDict()
        self._running = self._stopping = False

    # -- informer handlers (quick: the informer thread) ------------------------------------

    def added(self, obj: JSON) -> None:
        self._seen(obj, changed=True)

    def updated(self, old: JSON, new: JSON) -> None:
        version = (old.get("metadata") or {}).get("resourceVersion")
        self._seen(new, changed=version != (new.get("metadata") or {}).get("resourceVersion"))

    def deleted(self, obj: JSON) -> None:
        key = object_key(obj)
        with self._lock:
            self._objects.pop(key, None)
            self._end(key)

    def _seen(self, obj: JSON, *, changed: bool) -> None:
        key = object_key(obj)
        with self._lock:
            if (obj.get("metadata") or {}).get("deletionTimestamp"):
                self._objects.pop(key, None)
                self._end(key)  # marked for deletion: daemons stop, as kopf's
                return
            previous = self._objects.get(key)
            since = self._clock() if changed or previous is None else previous[1]
            self._objects[key] = (obj, since)
            if previous is None:
                for index in range(len(self._specs)):
                    self._waiting[(key, index)] = None
                self._fill()

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        with self._lock:
            self._running = True
            self._fill()

    def stop(self, timeout: float | None) -> bool:
        """Set every stop event; join within `timeout`; fence the threads still running."""
        with self._lock:
            self._stopping = True
            self._waiting.clear()
            runs = list(self._runs.values())
        for run in runs:
            run.stop.set()
        deadline = None if timeout is None else self._clock() + timeout
        ended = True
        for run in runs:
            left = None if deadline is None else max(0.0, deadline - self._clock())
            if run.thread is not None:
                run.thread.join(left)
                if run.thread.is_alive():
                    ended = False
                    run.fence.close(0, cause="shutdown")
                    self._log.error(
                        "%s of %s still running at shutdown; its writes are fenced",
                        run.spec.name,
                        _where(run.key),
                    )
        return ended

    @property
    def running(self) -> int:
        with self._lock:
            return len(self._runs)

    # -- threads (under self._lock) ------------------------------------------------------------

    def _end(self, key: ObjectKey) -> None:
        for index in range(len(self._specs)):
            self._waiting.pop((key, index), None)
            run = self._runs.get((key, index))
            if run is not None:
                run.stop.set()

    def _fill(self) -> None:
        if not self._running or self._stopping or not self._term.admits():
            return
        while self._waiting and len(self._runs) < self._max:
            slot, _ = self._waiting.popitem(last=False)
            spec = self._specs[slot[1]]
            fence = WriteFence(reason=f"{spec.name} was stopped", parent=self._term.fence)
            run = _Run(spec, slot[0], DaemonStop(functools.partial(self._model, slot[0])), fence)
            run.thread = threading.Thread(
                target=self._thread, args=(slot, run), name=f"object-{spec.name}", daemon=True
            )
            self._runs[slot] = run
            self._count(spec.name, 1)
            run.thread.start()

    def _thread(self, slot: tuple[ObjectKey, int], run: _Run) -> None:
        try:
            with fenced(run.fence):
                if isinstance(run.spec, Daemon):
                    self._daemon(run.spec, run)
                else:
                    self._timer(run.spec, run)
        finally:
            with self._lock:
                if self._runs.get(slot) is run:  # not a successor's (object recreated)
                    del self._runs[slot]
                self._count(run.spec.name, -1)
                self._fill()

    # -- the loops (on the object's thread) ------------------------------------------------

    def _model(self, key: ObjectKey) -> Any | None:
        with self._lock:
            latest = self._objects.get(key)
        if latest is None:
            return None
        try:
            return build(self._resource, latest[0])
        except InvalidObject as error:
            self._log.warning("%s does not fit the model: %s", _where(key), error)
            return None

    def _call(self, run: _Run, *args: Any) -> bool:
        try:
            run.spec.function(*args)
            return True
        except Exception as error:
            self._failed(run.spec.name)
            self._log.error("%s raised for %s", run.spec.name, _where(run.key), exc_info=error)
            return False

    def _daemon(self, spec: Daemon, run: _Run) -> None:
        while not run.stop.is_set():
            model = self._model(run.key)
            if model is None or self._call(run, model, run.stop):
                return
            run.stop.wait(spec.retry)

    def _timer(self, spec: Timer, run: _Run) -> None:
        if run.stop.wait(spec.initial_delay):
            return
        while not run.stop.is_set():
            with self._lock:
                latest = self._objects.get(run.key)
            if latest is None:
                return
            quiet = self._clock() - latest[1]
            if spec.idle is not None and quiet < spec.idle:
                run.stop.wait(spec.idle - quiet)
                continue
            model = self._model(run.key)
            if model is not None:
                self._call(run, model)
            run.stop.wait(spec.interval)


def _where(key: ObjectKey) -> str:
    return f"{key[0]}/{key[1]}" if key[0] else key[1]
