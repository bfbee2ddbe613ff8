"""Wake a `threading.Condition` when someone else's `threading.Event` is set.

A caller's stop event cannot notify anyone: Python offers no wait on "this event or that
condition". Rather than re-check the event on a timer, one relay thread per event object
blocks on it and, once it is set, notifies every condition subscribed to it, then ends.
Subscriptions are cheap and shared: many runs on one stop event cost one thread. The cost
of the missing primitive: an event nobody ever sets keeps its relay thread (daemon, blocked,
idle) for the life of the process; owners should set their stop events when done with them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["relay"]

_LOCK = threading.Lock()
_RELAYS: dict[int, _Relay] = {}


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
