"""A stop event wakes a condition: a `StopEvent` from its own `set` (no thread), a caller's
plain Event through one shared relay thread per event."""

from __future__ import annotations

import threading

from waiting import wait_until

from cloudcoil_sync.controller._internal.event_relay import StopEvent, relay


def relays() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "cloudcoil-stop-relay"]


def test_setting_the_event_notifies_every_subscribed_condition_and_ends_the_thread() -> None:
    before = len(relays())
    event = threading.Event()
    first, second = threading.Condition(), threading.Condition()
    woken: list[str] = []

    def waiter(name: str, condition: threading.Condition) -> None:
        with condition:
            if condition.wait_for(event.is_set, 10):
                woken.append(name)

    threads = [
        threading.Thread(target=waiter, args=("first", first)),
        threading.Thread(target=waiter, args=("second", second)),
    ]
    relay(event, first)
    relay(event, second)
    assert len(relays()) == before + 1  # one thread for one event, however many subscribe
    for thread in threads:
        thread.start()
    event.set()
    for thread in threads:
        thread.join(5)
    assert sorted(woken) == ["first", "second"]
    assert wait_until(lambda: len(relays()) == before, 5)


class Counting(threading.Condition):
    """A condition that counts its notify_all calls."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def notify_all(self) -> None:
        self.count += 1
        super().notify_all()


def test_an_unsubscribed_condition_is_not_notified() -> None:
    event, dropped, kept = threading.Event(), Counting(), Counting()
    relay(event, dropped)()  # subscribed, then unsubscribed at once
    relay(event, kept)
    event.set()
    assert wait_until(lambda: kept.count == 1, 5)
    assert dropped.count == 0


def test_an_event_already_set_needs_no_thread() -> None:
    before = len(relays())
    event = threading.Event()
    event.set()
    relay(event, threading.Condition())()
    assert len(relays()) == before


def test_a_stop_event_notifies_its_subscribers_from_set_without_a_thread() -> None:
    before = len(relays())
    event, kept, dropped = StopEvent(), Counting(), Counting()
    relay(event, kept)
    relay(event, dropped)()  # subscribed, then unsubscribed at once
    assert len(relays()) == before  # no thread waits on the event
    woken = threading.Event()

    def waiter() -> None:
        with kept:
            if kept.wait_for(event.is_set, 10):
                woken.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    event.set()  # notifies `kept` on this thread
    assert kept.count == 1 and dropped.count == 0
    thread.join(5)
    assert woken.is_set()


def test_subscribing_to_a_stop_event_already_set_notifies_at_once() -> None:
    event, condition = StopEvent(), Counting()
    event.set()
    relay(event, condition)()
    assert condition.count == 1
