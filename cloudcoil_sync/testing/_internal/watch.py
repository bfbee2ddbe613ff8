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
    rt, ns = watch.rt, watch.namespace
    labels = label_selector(query.get("labelSelector"))
    fields = field_selector(query.get("fieldSelector"))
    filtered = bool(query.get("labelSelector") or query.get("fieldSelector"))
    convert = rt.storage != ("", "")
    bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
    try:
        timeout = float(query.get("timeoutSeconds") or DEFAULT_TIMEOUT)
    except ValueError as exc:
        raise bad_request("timeoutSeconds must be a number") from exc
    requested = query.get("resourceVersion") or ""

    def matches(obj: JSON | None) -> bool:
        if obj is None:
            return False
        return not filtered or (labels(obj) and fields(obj))

    def view(obj: JSON) -> JSON:
        return from_storage(rt, obj)  # no copy unless kind/apiVersion differ

    initial: list[bytes] = []
    with store.lock:
        if requested in ("", "0"):
            entries, last = store.scan(rt.key, ns or None)
            initial = [_event("ADDED", view(e.obj)) for e in entries if matches(e.obj)]
        else:
            try:
                last = int(requested)
            except ValueError as exc:
                raise bad_request(f"invalid resource version {requested!r}") from exc
            try:
                store.check_watchable(last, requested)
            except ApiError as err:
                write(_event("ERROR", err.body()))
                return
    for chunk in initial:
        write(chunk)
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
        with store.lock:
            events = store.events_after(last)
            if not events:
                wake = min(deadline, next_bookmark if bookmarks else deadline, now + PEER_CHECK)
                store.changed.wait(max(0.0, wake - now))
                events = store.events_after(last)
            if last < store.compacted_rv:
                # Events this stream had not sent yet were dropped (history overflow or
                # forget_history): end it with 410 rather than skip them silently.
                write(_event("ERROR", expired(str(last), store.compacted_rv + 1).body()))
                return
        out: list[bytes] = []
        for ev in events:
            last = ev.rv
            if ev.key != rt.key or (ns and ev.namespace != ns):
                continue
            out_event = _translate(ev, matches)
            if out_event is None:
                continue
            type_, obj = out_event
            if type_ == ev.type and not convert and obj.get("apiVersion") == rt.api_version:
                out.append(ev.raw())
            else:
                out.append(_event(type_, view(obj)))
        if out:
            write(b"".join(out))
        quiet = not out  # other kinds' or namespaces' events do not count
        if bookmarks and time.monotonic() >= next_bookmark:
            meta = {"resourceVersion": str(last), "creationTimestamp": None}
            write(
                _event(
                    "BOOKMARK", {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}
                )
            )
            next_bookmark = time.monotonic() + bookmark_interval


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
