"""`Turns`: first come first served across connection threads, with a bounded hold."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from waiting import wait_until

from cloudcoil_sync.admission._internal.turns import Turns


@pytest.fixture
def turns() -> Iterator[Turns]:
    turns = Turns(max_hold=60.0)  # never passed on within a test unless it says so
    turns.start()
    yield turns
    assert turns.stop(timeout=5)


class Holder:
    """A thread that takes a turn, records when it got it, and holds it until released."""

    def __init__(self, turns: Turns, name: str, order: list[str]) -> None:
        self.entered = threading.Event()
        self.entered_at = 0.0
        self.release = threading.Event()
        self.done = threading.Event()

        def run() -> None:
            with turns.turn():
                order.append(name)
                self.entered_at = time.monotonic()
                self.entered.set()
                self.release.wait(10)
            self.done.set()

        self.thread = threading.Thread(target=run, name=f"holder-{name}")
        self.thread.start()

    def finish(self) -> None:
        self.release.set()
        self.thread.join(10)
        assert not self.thread.is_alive()


def test_turns_go_in_arrival_order(turns: Turns) -> None:
    order: list[str] = []
    first = Holder(turns, "a", order)
    assert first.entered.wait(5)
    queued = []
    for name in "bcd":
        queued.append(Holder(turns, name, order))
        assert wait_until(lambda: turns.waiting == len(queued), 5.0, 0.001)
    assert order == ["a"]
    first.finish()
    for name, holder in zip("bcd", queued, strict=True):
        assert holder.entered.wait(5)
        assert order[-1] == name  # the next in line, and only it
        holder.finish()
    assert order == ["a", "b", "c", "d"]
    assert turns.passed_on == 0


def test_only_one_thread_holds_a_turn_at_a_time(turns: Turns) -> None:
    inside, most = 0, 0
    lock = threading.Lock()

    def work() -> None:
        nonlocal inside, most
        for _ in range(200):
            with turns.turn():
                with lock:
                    inside += 1
                    most = max(most, inside)
                time.sleep(0)  # give the GIL away while holding the turn
                with lock:
                    inside -= 1

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert most == 1


def test_a_turn_kept_too_long_passes_to_the_next_while_its_holder_goes_on() -> None:
    turns = Turns(max_hold=0.2)
    turns.start()
    try:
        order: list[str] = []
        blocked = Holder(turns, "blocked", order)
        assert blocked.entered.wait(5)
        waiting = Holder(turns, "next", order)
        assert waiting.entered.wait(5)  # while the first still holds its turn
        assert not blocked.done.is_set()
        assert waiting.entered_at - blocked.entered_at >= 0.1  # not before the hold ran out
        assert turns.passed_on == 1
        waiting.finish()
        blocked.finish()  # giving back a turn already passed on changes nothing
        third = Holder(turns, "third", order)
        assert third.entered.wait(5)
        third.finish()
        assert order == ["blocked", "next", "third"]
        assert turns.passed_on == 1
    finally:
        assert turns.stop(timeout=5)


def test_a_long_turn_nobody_waits_for_is_kept_and_costs_no_wakeups(turns: Turns) -> None:
    order: list[str] = []
    for name in "xyz":
        holder = Holder(turns, name, order)
        assert holder.entered.wait(5)
        holder.finish()
    assert order == ["x", "y", "z"]
    assert turns.wakeups == 0  # the monitor slept untimed all along


def test_stop_lets_every_waiter_go_on_and_later_turns_never_wait() -> None:
    turns = Turns(max_hold=60.0)
    turns.start()
    order: list[str] = []
    holder = Holder(turns, "holder", order)
    assert holder.entered.wait(5)
    waiter = Holder(turns, "waiter", order)
    assert wait_until(lambda: turns.waiting == 1, 5.0, 0.001)
    assert turns.stop(timeout=5)
    assert waiter.entered.wait(5)  # went on although the holder still holds
    with turns.turn():  # no monitor any more: never waits
        pass
    waiter.finish()
    holder.finish()
    assert turns._thread is not None and not turns._thread.is_alive()  # the monitor joined


def test_turns_never_wait_before_start() -> None:
    turns = Turns()
    order: list[str] = []
    first = Holder(turns, "first", order)
    second = Holder(turns, "second", order)
    assert first.entered.wait(5) and second.entered.wait(5)  # both inside at once
    first.finish()
    second.finish()


def test_start_twice_is_an_error(turns: Turns) -> None:
    with pytest.raises(RuntimeError, match="only be started once"):
        turns.start()


@pytest.mark.parametrize("hold", [0, -1.0, float("nan")])
def test_max_hold_must_be_positive(hold: float) -> None:
    with pytest.raises(ValueError, match="max_hold must be a positive"):
        Turns(max_hold=hold)
