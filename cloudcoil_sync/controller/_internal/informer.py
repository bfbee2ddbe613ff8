"""One list/watch thread per informer, feeding a store of compact JSON (see `store`).

The thread lists (following `continue` pages), then watches from the list's
resourceVersion with bookmarks, resuming from the last resourceVersion it saw whenever a
stream ends or breaks. A 410 Expired (too old resourceVersion), or an event longer than the
client takes (`WatchEventTooLarge`: the stream cannot go on past it), relists and dispatches
what changed in the gap: update for objects still there, delete for the vanished, add for
the new, delete then add for the recreated (new UID). Every `resync_period` it relists
the same way, so every object is dispatched again. 401/403/404/400 and handler errors are
fatal: the thread stops and the owner sees the error (`error`, `wait_synced`,
`on_failure`).
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from cloudcoil_sync._internal.service import ExitCallback, joined
from cloudcoil_sync.client import APIError, Expired, WatchEventTooLarge
from cloudcoil_sync.client._internal.errors import api_error
from cloudcoil_sync.controller._internal.listwatch import ClientListWatch, ListWatch, WatchStream
from cloudcoil_sync.controller._internal.store import JSON, IndexFunc, Store, decode, object_key

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "DEFAULT_RESYNC_PERIOD",
    "DEFAULT_WATCH_TIMEOUT",
    "MIN_RESYNC_PERIOD",
    "ClientListWatch",
    "Informer",
    "InformerFailed",
    "ListWatch",
    "WatchStream",
]

DEFAULT_RESYNC_PERIOD = 300.0
MIN_RESYNC_PERIOD = 30.0
DEFAULT_PAGE_SIZE = 500
DEFAULT_WATCH_TIMEOUT = 300

# Errors that retrying cannot fix: bad request, credentials, RBAC, unknown resource type.
FATAL_STATUS = frozenset({400, 401, 403, 404, 405, 406, 415, 422})

logger = logging.getLogger("cloudcoil_sync.controller.informer")


class _Stopped(Exception):
    """The informer was stopped while listing: the partial list is dropped."""


class InformerFailed(RuntimeError):
    """The informer stopped for good; `__cause__` is the error that stopped it."""


@dataclass(frozen=True)
class _Handler:
    on_add: Callable[[JSON], None] | None
    on_update: Callable[[JSON, JSON], None] | None
    on_delete: Callable[[JSON], None] | None


class _Relist(Exception):
    """Internal: the watch must restart from a fresh list."""


class Informer:
    """Cache one kind (in one scope) and tell handlers about every change.

    Register handlers before `start()`. Handlers run on the informer thread, in
    registration order, after the store already reflects the change; they must be quick
    (enqueue a key). The dicts they receive are shared between handlers: do not edit them.
    """

    def __init__(
        self,
        source: ListWatch,
        *,
        name: str,
        resync_period: float = DEFAULT_RESYNC_PERIOD,
        page_size: int = DEFAULT_PAGE_SIZE,
        watch_timeout: int = DEFAULT_WATCH_TIMEOUT,
        indexers: Mapping[str, IndexFunc] | None = None,
        strip_managed_fields: bool = True,
        on_failure: Callable[[BaseException], None] | None = None,
        on_synced: Callable[[], None] | None = None,
        min_backoff: float = 0.8,
        max_backoff: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not math.isfinite(resync_period) or resync_period < MIN_RESYNC_PERIOD:
            raise ValueError(f"resync_period must be at least {MIN_RESYNC_PERIOD:g} seconds")
        if page_size < 1 or watch_timeout < 1:
            raise ValueError("page_size and watch_timeout must be positive")
        self.name = name
        self.store = Store(indexers)
        self._source = source
        self._resync_period = resync_period
        self._page_size, self._watch_timeout = page_size, watch_timeout  # list page, watch
        self._strip_managed_fields = strip_managed_fields
        self._on_failure = on_failure
        self._on_synced = on_synced  # an owner waiting on its own condition is told
        self._on_exit: ExitCallback | None = None
        self._backoff = (min_backoff, max_backoff)  # after a failed list or watch
        self._clock = clock
        self._handlers: list[_Handler] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stopping = False  # set before _stop: read per event (Event.is_set is Python)
        self._state = threading.Condition()
        self._synced = self._finished = self._resync_requested = False
        self._thread: threading.Thread | None = None
        self._watch: WatchStream | None = None
        self._resource_version = ""
        self._error: BaseException | None = None
        self.list_count = 0  # completed lists (initial, relists and resyncs)

    # -- owner API -----------------------------------------------------------------------

    def add_handler(
        self,
        *,
        on_add: Callable[[JSON], None] | None = None,
        on_update: Callable[[JSON, JSON], None] | None = None,
        on_delete: Callable[[JSON], None] | None = None,
    ) -> None:
        if self._thread is not None:
            raise RuntimeError("Register informer handlers before starting it")
        self._handlers.append(_Handler(on_add, on_update, on_delete))

    def start(self, on_exit: ExitCallback | None = None) -> None:
        """Start the list/watch thread; `on_exit` is called if it ends without `stop` (a
        fatal error), after `on_failure`."""
        with self._lock:
            if self._thread is not None:
                raise RuntimeError("An informer can only be started once")
            self._on_exit = on_exit
            self._thread = threading.Thread(
                target=self._run, name=f"informer-{self.name}", daemon=True
            )
        self._thread.start()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """As `wait_synced`: ready once the first list completed."""
        return self.wait_synced(timeout)

    def healthy(self) -> bool:
        return self._error is None and not (self._finished and not self._stop.is_set())

    def stop(self, timeout: float | None = 10.0) -> bool:
        """Stop the thread (closing an open watch at once); True once it has ended."""
        self._stopping = True
        self._stop.set()
        with self._lock:
            watch = self._watch
        if watch is not None:
            _close_quietly(watch)
        thread = self._thread
        return joined(thread, timeout)  # False from a handler or on_failure: it ends after

    @property
    def synced(self) -> bool:
        """The first list completed (the store holds a full snapshot)."""
        return self._synced

    @property
    def running(self) -> bool:
        return self._thread is not None and not self._finished

    @property
    def error(self) -> BaseException | None:
        """The fatal error that stopped the informer, if any."""
        return self._error

    @property
    def resource_version(self) -> str:
        return self._resource_version

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Block until the first list completed; False on timeout or if stopped first.

        Raises `InformerFailed` if the informer stopped with a fatal error first.
        """
        with self._state:
            self._state.wait_for(lambda: self._synced or self._finished, timeout)
            if self._synced:
                return True
        failure = self.failure()
        if failure is not None:
            raise failure
        return False

    def wait_finished(self, timeout: float | None = None) -> bool:
        """Block until the thread has ended (stopped or failed)."""
        with self._state:
            return self._state.wait_for(lambda: self._finished, timeout)

    def resync(self) -> None:
        """Relist now (as the periodic resync does), closing the open watch."""
        self._resync_requested = True
        with self._lock:
            watch = self._watch
        if watch is not None:
            _close_quietly(watch)

    # -- the thread ------------------------------------------------------------------------

    def failure(self) -> InformerFailed | None:
        """The fatal error that stopped the thread, with a hint (CRD? RBAC?); no wait."""
        error = self._error
        if error is None:
            return None
        hint = ""
        if isinstance(error, APIError) and error.status_code == 404:
            hint = " (the API server does not serve this resource: is its CRD installed?)"
        elif isinstance(error, APIError) and error.status_code == 403:
            hint = " (RBAC denies list/watch: check the operator's Role or ClusterRole)"
        failed = InformerFailed(f"Informer {self.name} failed: {error}{hint}")
        failed.__cause__ = error
        return failed

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as error:  # fatal: surfaced to the owner
            if not self._stop.is_set():
                self._error = error
                logger.error("Informer %s stopped: %s", self.name, error, exc_info=error)
                if self._on_failure is not None:
                    try:
                        self._on_failure(error)
                    except Exception:
                        logger.exception("Informer %s failure callback raised", self.name)
        finally:
            with self._state:
                self._finished = True
                self._state.notify_all()
            if self._on_exit is not None and not self._stop.is_set():
                self._on_exit(self._error)

    def _loop(self) -> None:
        failures = 0
        need_list = True
        next_resync = 0.0
        while not self._stop.is_set():
            listing = need_list
            try:
                if need_list:
                    self._resync_requested = False
                    self._relist()
                    need_list = False
                    next_resync = self._clock() + self._resync_period
                    failures = 0
                remaining = next_resync - self._clock()
                if remaining <= 0 or self._resync_requested:
                    need_list = True
                    continue
                started = self._clock()
                if self._watch_once(remaining):
                    failures = 0
                elif self._stop.is_set() or self._resync_requested:
                    continue
                elif self._clock() - started < 1:
                    # An empty stream that ended at once: do not spin on reconnects.
                    failures += 1
                    self._back_off(failures, "watch stream ended at once", None, quiet=True)
            except _Relist:
                need_list = True
            except _HandlerError as error:
                raise error.__cause__ or error from None
            except WatchEventTooLarge as error:
                # The stream cannot go on past that event: list, then watch from there.
                need_list = True
                failures += 1
                self._back_off(failures, error, None)
            except APIError as error:
                if error.status_code in FATAL_STATUS:
                    raise
                need_list = need_list or error.status_code == 410
                if error.status_code != 410 or listing:
                    failures += 1
                    self._back_off(failures, error, error.retry_after)
            except Exception as error:
                if self._stop.is_set():
                    return
                failures += 1
                self._back_off(failures, error, None)

    def _back_off(
        self, failures: int, error: object, hint: float | None, *, quiet: bool = False
    ) -> None:
        shortest, longest = self._backoff
        delay = min(longest, shortest * 2 ** min(failures - 1, 16))
        delay *= random.uniform(0.9, 1.1)
        if hint is not None:
            delay = max(delay, min(hint, longest))
        level = logging.DEBUG if quiet and failures < 3 else logging.WARNING
        logger.log(level, "Informer %s: %s; retrying in %.2fs", self.name, error, delay)
        self._stop.wait(delay)

    def _relist(self) -> None:
        listed: list[str] = []

        def objects() -> Iterator[JSON]:
            # One page of parsed objects at a time: the store encodes each as it goes.
            for page, version in self._source.pages(limit=self._page_size):
                if self._stop.is_set():
                    raise _Stopped
                listed.append(version)
                yield from map(self._prepare, page)  # map: no generator resumed per item

        try:
            old, fresh = self.store.replace(objects())
        except _Stopped:
            return
        self._resource_version = listed[-1] if listed else ""
        self.list_count += 1
        # Handlers get decoded copies: the store keeps its own encoded bytes.
        for key, encoded in fresh.items():
            new = decode(encoded)
            data = old.pop(key, None)
            if data is None:
                self._notify_add(new)
                continue
            previous = decode(data)
            if _uid(previous) != _uid(new):
                self._notify_delete(previous)
                self._notify_add(new)
            else:
                self._notify_update(previous, new)
        for data in old.values():
            self._notify_delete(decode(data))
        with self._state:
            first, self._synced = not self._synced, True
            self._state.notify_all()
        if first and self._on_synced is not None:
            self._on_synced()

    def _watch_once(self, remaining: float) -> bool:
        """Watch until the stream ends; True if it delivered anything (healthy)."""
        timeout = max(1, min(self._watch_timeout, math.ceil(remaining)))
        stream = self._source.watch(
            resource_version=self._resource_version, timeout_seconds=timeout
        )
        with self._lock:
            self._watch = stream
        if self._stop.is_set() or self._resync_requested:
            # stop()/resync() may have looked for an open watch just before this one.
            with self._lock:
                self._watch = None
            _close_quietly(stream)
            return False
        delivered = False
        try:
            for kind, obj in stream:
                if self._stopping or self._resync_requested:
                    break
                self._apply(kind, obj)
                delivered = True
        except (_HandlerError, _Relist):
            raise
        except Exception:
            if self._stop.is_set() or self._resync_requested:
                return delivered  # we closed the stream ourselves
            raise
        finally:
            with self._lock:
                self._watch = None
            _close_quietly(stream)
        return delivered

    def _apply(self, kind: str, obj: JSON) -> None:
        if kind == "ERROR":
            error = api_error(int(obj.get("code") or 500), obj)
            if isinstance(error, Expired) or error.status_code == 410:
                raise _Relist
            raise error
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if kind == "BOOKMARK":
            if version:
                self._resource_version = version
            return
        obj = self._prepare(obj)
        if kind in ("ADDED", "MODIFIED"):
            data = self.store.put(obj)
            old = None if data is None else decode(data)
            if old is None:
                self._notify_add(obj)
            elif (old.get("metadata") or {}).get("uid") != (obj.get("metadata") or {}).get("uid"):
                self._notify_delete(old)
                self._notify_add(obj)
            else:
                self._notify_update(old, obj)
        elif kind == "DELETED":
            self.store.remove(object_key(obj))
            self._notify_delete(obj)
        else:
            logger.warning("Informer %s: ignoring watch event of type %r", self.name, kind)
        if version:
            self._resource_version = version

    def _prepare(self, obj: JSON) -> JSON:
        if self._strip_managed_fields:
            metadata = obj.get("metadata")
            if isinstance(metadata, dict):
                metadata.pop("managedFields", None)
        return obj

    # -- dispatch ----------------------------------------------------------------------------

    def _notify_add(self, obj: JSON) -> None:
        for handler in self._handlers:
            if handler.on_add is not None:
                _call(handler.on_add, obj)

    def _notify_update(self, old: JSON, new: JSON) -> None:
        for handler in self._handlers:
            if handler.on_update is not None:
                _call(handler.on_update, old, new)

    def _notify_delete(self, obj: JSON) -> None:
        for handler in self._handlers:
            if handler.on_delete is not None:
                _call(handler.on_delete, obj)


class _HandlerError(Exception):
    """Internal: a handler raised; fatal for the informer."""


def _call(handler: Callable[..., None], *args: JSON) -> None:
    try:
        handler(*args)
    except Exception as error:
        raise _HandlerError from error


def _uid(obj: Mapping[str, Any]) -> str | None:
    return (obj.get("metadata") or {}).get("uid")


def _close_quietly(stream: WatchStream) -> None:
    try:
        stream.close()
    except Exception:
        logger.debug("Closing a watch stream failed", exc_info=True)
