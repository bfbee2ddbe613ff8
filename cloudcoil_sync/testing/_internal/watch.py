"""Watch streams: initial state or history replay, live events, bookmarks, timeouts, 410."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cloudcoil_sync.testing._internal.resources import ResourceType
from cloudcoil_sync.testing._internal.selectors import field_selector, label_selector
from cloudcoil_sync.testing._internal.status import ApiError, bad_request, expired
from cloudcoil_sync.testing._internal.store import Store, WatchEvent, dumps
from cloudcoil_sync.testing._internal.validation import from_storage

__all__ = ["Watch", "WatchRegistry"]

JSON = dict[str, Any]
DEFAULT_TIMEOUT = 1800.0
PEER_CHECK = 2.0  # seconds between checks that an idle watch's client is still there


@dataclass
class Watch:
    """One open stream; ``closing`` ends it, ``abort`` asks the server to cut the connection."""

    rt: ResourceType
    namespace: str
    closing: threading.Event = field(default_factory=threading.Event)
    abort: bool = False


class WatchRegistry:
    """The open watches, so faults and shutdown can end them promptly."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Condition()
        self._watches: dict[int, Watch] = {}

    def add(self, watch: Watch) -> None:
        with self._lock:
            self._watches[id(watch)] = watch

    def remove(self, watch: Watch) -> None:
        with self._lock:
            self._watches.pop(id(watch), None)
            self._lock.notify_all()

    def wait_closed(self, timeout: float) -> bool:
        """Wait until no watch is open (after ``drop_all``)."""
        with self._lock:
            return self._lock.wait_for(lambda: not self._watches, timeout)

    def count(self) -> int:
        with self._lock:
            return len(self._watches)

    def drop_all(self, abort: bool = False) -> int:
        with self._lock:
            watches = list(self._watches.values())
        for watch in watches:
            watch.abort = abort
            watch.closing.set()
        self.store.wake_all()
        return len(watches)


def _event(type_: str, obj: JSON) -> bytes:
    return dumps({"type": type_, "object": obj}) + b"\n"


def serve(
    store: Store,
    watch: Watch,
    query: dict[str, str],
    write: Callable[[bytes], None],
    bookmark_interval: float,
    stopping: threading.Event,
    peer_gone: Callable[[], bool] = lambda: False,
) -> None:
    """Stream events for ``watch`` through ``write`` until timeout, close or shutdown."""
    stream = _Stream(store, watch, query, write)
    try:
        timeout = float(query.get("timeoutSeconds") or DEFAULT_TIMEOUT)
    except ValueError as exc:
        raise bad_request("timeoutSeconds must be a number") from exc
    if not stream.start(query.get("resourceVersion") or ""):
        return
    start = time.monotonic()
    deadline = start + timeout
    next_bookmark = start + bookmark_interval
    quiet = False  # nothing was written last round: no failed write can reveal a gone peer
    while not watch.closing.is_set() and not stopping.is_set():
        now = time.monotonic()
        if now >= deadline:
            return
        if quiet and peer_gone():  # an idle stream whose client left: free the thread now
            watch.abort = True
            return
        wake = min(deadline, next_bookmark if stream.bookmarks else deadline, now + PEER_CHECK)
        events = stream.wait(max(0.0, wake - now))
        if events is None:
            return
        quiet = not stream.send(events)  # other kinds' or namespaces' events do not count
        if stream.bookmarks and time.monotonic() >= next_bookmark:
            stream.bookmark()
            next_bookmark = time.monotonic() + bookmark_interval


class _Stream:
    """One watch's selection and position: what it has sent and what it sends next."""

    def __init__(
        self, store: Store, watch: Watch, query: dict[str, str], write: Callable[[bytes], None]
    ) -> None:
        self.store, self.write = store, write
        self.rt, self.namespace = watch.rt, watch.namespace
        self._labels = label_selector(query.get("labelSelector"))
        self._fields = field_selector(query.get("fieldSelector"))
        self._filtered = bool(query.get("labelSelector") or query.get("fieldSelector"))
        self._convert = self.rt.storage != ("", "")
        self.bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        self.last = 0

    def matches(self, obj: JSON | None) -> bool:
        if obj is None:
            return False
        return not self._filtered or bool(self._labels(obj) and self._fields(obj))

    def view(self, obj: JSON) -> JSON:
        return from_storage(self.rt, obj)  # no copy unless kind/apiVersion differ

    def start(self, requested: str) -> bool:
        """Send the initial ADDED events (from "" or "0"), or check `requested` is still in
        the history (else an ERROR event); whether the stream goes on."""
        initial: list[bytes] = []
        with self.store.lock:
            if requested in ("", "0"):
                entries, self.last = self.store.scan(self.rt.key, self.namespace or None)
                initial = [
                    _event("ADDED", self.view(e.obj)) for e in entries if self.matches(e.obj)
                ]
            else:
                try:
                    self.last = int(requested)
                except ValueError as exc:
                    raise bad_request(f"invalid resource version {requested!r}") from exc
                try:
                    self.store.check_watchable(self.last, requested)
                except ApiError as err:
                    self.write(_event("ERROR", err.body()))
                    return False
        for chunk in initial:
            self.write(chunk)
        return True

    def wait(self, seconds: float) -> list[WatchEvent] | None:
        """Events after the last one sent, waiting up to `seconds` for one; None once the
        history lost some of them (the stream then ends with 410, as it was sent)."""
        store = self.store
        with store.lock:
            events = store.events_after(self.last)
            if not events:
                store.changed.wait(seconds)
                events = store.events_after(self.last)
            if self.last < store.compacted_rv:
                # Events this stream had not sent yet were dropped (history overflow or
                # forget_history): end it with 410 rather than skip them silently.
                self.write(_event("ERROR", expired(str(self.last), store.compacted_rv + 1).body()))
                return None
        return events

    def send(self, events: list[WatchEvent]) -> bool:
        """Write the events this watch selects; whether there was any."""
        rt, out = self.rt, []
        for ev in events:
            self.last = ev.rv
            if ev.key != rt.key or (self.namespace and ev.namespace != self.namespace):
                continue
            out_event = _translate(ev, self.matches)
            if out_event is None:
                continue
            type_, obj = out_event
            if type_ == ev.type and not self._convert and obj.get("apiVersion") == rt.api_version:
                out.append(ev.raw())
            else:
                out.append(_event(type_, self.view(obj)))
        if out:
            self.write(b"".join(out))
        return bool(out)

    def bookmark(self) -> None:
        meta = {"resourceVersion": str(self.last), "creationTimestamp": None}
        self.write(
            _event(
                "BOOKMARK",
                {"kind": self.rt.kind, "apiVersion": self.rt.api_version, "metadata": meta},
            )
        )


def _translate(ev: WatchEvent, matches: Callable[[JSON | None], bool]) -> tuple[str, JSON] | None:
    """Event type as this watcher sees it: objects entering/leaving its selector."""
    now_in = matches(ev.obj)
    if ev.type == "ADDED":
        return ("ADDED", ev.obj) if now_in else None
    if ev.type == "DELETED":
        return ("DELETED", ev.obj) if now_in else None
    was_in = matches(ev.old)
    if now_in and was_in:
        return ("MODIFIED", ev.obj)
    if now_in:
        return ("ADDED", ev.obj)
    if was_in:
        return ("DELETED", ev.obj)
    return None
