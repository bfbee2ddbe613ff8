"""Wake a `threading.Condition` when a stop event is set.

Python offers no wait on "this event or that condition". A `StopEvent` (the framework's own
stop events) notifies the conditions subscribed to it from `set` itself: no thread. A plain
`threading.Event` from a caller cannot be hooked (its `set` notifies only its own waiters),
so one relay thread per such event object blocks on it and, once it is set, notifies every
subscribed condition, then ends; an event nobody ever sets keeps its relay thread (daemon,
blocked) for the life of the process. Pass a `StopEvent` to avoid it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["StopEvent", "relay"]

_LOCK = threading.Lock()
_RELAYS: dict[int, _Relay] = {}


class StopEvent(threading.Event):
    """A `threading.Event` that notifies subscribed conditions when set (no relay thread)."""

    def __init__(self) -> None:
        super().__init__()
        self._subscribed: list[threading.Condition] = []
        self._subscribing = threading.Lock()

    def set(self) -> None:
        super().set()
        with self._subscribing:
            conditions = list(self._subscribed)
        for condition in conditions:
            with condition:
                condition.notify_all()

    def subscribe(self, condition: threading.Condition) -> Callable[[], None]:
        """Notify `condition` on `set` (at once if set already); returns the unsubscribe."""
        with self._subscribing:
            self._subscribed.append(condition)
        if self.is_set():  # set meanwhile: its notification may have missed us
            with condition:
                condition.notify_all()

        def unsubscribe() -> None:
            with self._subscribing:
                if condition in self._subscribed:
                    self._subscribed.remove(condition)

        return unsubscribe


class _Relay:
    def __init__(self, event: threading.Event) -> None:
        self.event = event
        self.conditions: list[threading.Condition] = []
        self.thread = threading.Thread(target=self._wait, name="cloudcoil-stop-relay", daemon=True)

    def _wait(self) -> None:
        self.event.wait()  # woken by the owner's set(); this thread exists for nothing else
        with _LOCK:
            _RELAYS.pop(id(self.event), None)
            conditions = list(self.conditions)
        for condition in conditions:
            with condition:
                condition.notify_all()


def relay(event: threading.Event, condition: threading.Condition) -> Callable[[], None]:
    """Notify ``condition`` once ``event`` is set; returns the unsubscribe function."""
    if isinstance(event, StopEvent):
        return event.subscribe(condition)
    if event.is_set():
        return lambda: None
    with _LOCK:
        current = _RELAYS.get(id(event))
        if current is None or current.event is not event:
            current = _RELAYS[id(event)] = _Relay(event)
            current.thread.start()
        current.conditions.append(condition)

    def unsubscribe() -> None:
        with _LOCK:
            if condition in current.conditions:
                current.conditions.remove(condition)

    return unsubscribe
