"""`ServiceGroup` and `await_ready`: start order, readiness gating, supervision by exit
callbacks, reverse stop order with per-service timeouts, and what is reported."""

from __future__ import annotations

import threading

import pytest

from cloudcoil_sync._internal.service import (
    ExitCallback,
    Service,
    ServiceGroup,
    ServiceNotReady,
    await_ready,
)
from cloudcoil_sync.admission._internal.server import WebhookHost
from cloudcoil_sync.controller import HealthServer


class Worker:
    """A service with one thread that runs until stopped, or ends when told to."""

    def __init__(
        self,
        name: str,
        log: list[str],
        *,
        ready: bool = True,
        stops: bool = True,
        stop_error: Exception | None = None,
        start_error: Exception | None = None,
    ) -> None:
        self._name = name
        self.log = log
        self.ready = threading.Event()
        if ready:
            self.ready.set()
        self.started = threading.Event()
        self.end = threading.Event()  # set: the thread returns
        self.crash: BaseException | None = None
        self.stops = stops
        self.stop_error = stop_error
        self.start_error = start_error
        self.stop_timeouts: list[float | None] = []
        self._stopping = False
        self._thread: threading.Thread | None = None

    @property
    def name(self) -> str:
        return self._name

    def start(self, on_exit: ExitCallback | None = None) -> None:
        if self.start_error is not None:
            raise self.start_error
        self.log.append(f"start {self._name}")

        def run() -> None:
            self.started.set()
            self.end.wait()
            if on_exit is not None and not self._stopping:
                on_exit(self.crash)

        self._thread = threading.Thread(target=run, name=f"test-{self._name}")
        self._thread.start()

    def stop(self, timeout: float | None = None) -> bool:
        self.log.append(f"stop {self._name}")
        self.stop_timeouts.append(timeout)
        self._stopping = True
        if self.stop_error is not None:
            self.end.set()
            raise self.stop_error
        if not self.stops:
            return False
        self.end.set()
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    def wait_ready(self, timeout: float | None = None) -> bool:
        return self.ready.wait(timeout)

    def healthy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def release(self) -> None:
        self.end.set()
        if self._thread is not None:
            self._thread.join(5)


def test_starts_in_order_waits_for_readiness_and_stops_in_reverse() -> None:
    log: list[str] = []
    caches = Worker("caches", log, ready=False)
    webhooks, leader = Worker("webhooks", log), Worker("leader", log)
    group = ServiceGroup("operator")
    group.add(caches, ready_timeout=10, stop_timeout=3)
    group.add(webhooks, stop_timeout=4)
    group.add(leader)
    starter = threading.Thread(target=group.start)
    starter.start()
    assert caches.started.wait(5)
    starter.join(0.2)
    assert starter.is_alive() and log == ["start caches"]  # webhooks wait for the caches
    caches.ready.set()
    starter.join(5)
    assert log == ["start caches", "start webhooks", "start leader"]
    assert group.healthy() and group.wait_ready(5)
    assert isinstance(group, Service)

    assert group.stop() is True and group.late == ()
    assert log[3:] == ["stop leader", "stop webhooks", "stop caches"]
    assert (caches.stop_timeouts, webhooks.stop_timeouts) == ([3], [4])
    assert group.exited is None and group.stop_event.is_set()


def test_a_member_that_ends_wakes_the_owner_and_the_rest_stop() -> None:
    log: list[str] = []
    stop = threading.Event()  # the owner's own stop event: one wait for both
    first, second = Worker("first", log), Worker("second", log)
    group = ServiceGroup("operator", stop_event=stop)
    group.add(first)
    group.add(second)
    exits: list[BaseException | None] = []
    group.start(on_exit=exits.append)
    second.crash = RuntimeError("watch died")
    second.end.set()
    assert group.wait(10)
    assert stop.is_set() and group.exited == "second"
    assert isinstance(group.exit_error, RuntimeError) and exits == [group.exit_error]
    assert not group.healthy()
    assert group.stop(5)
    assert log[2:] == ["stop second", "stop first"]


def test_stop_reports_late_members_and_errors_and_still_stops_the_others() -> None:
    log: list[str] = []
    stuck = Worker("stuck", log, stops=False)
    broken = Worker("broken", log, stop_error=ValueError("socket gone"))
    fine = Worker("fine", log)
    group = ServiceGroup("operator")
    for service in (fine, stuck, broken):
        group.add(service)
    group.start()
    assert group.stop(timeout=5) is False
    assert group.late == ("stuck",)
    assert [str(e) for e in group.stop_errors] == ["socket gone"]
    assert log[3:] == ["stop broken", "stop stuck", "stop fine"]
    assert fine.stop_timeouts[0] is not None and fine.stop_timeouts[0] <= 5  # capped
    stuck.release()


def test_a_start_failure_stops_what_started_in_reverse_and_raises() -> None:
    log: list[str] = []
    one, two = Worker("one", log), Worker("two", log)
    bad = Worker("bad", log, start_error=OSError("port in use"))
    group = ServiceGroup("operator")
    for service in (one, two, bad):
        group.add(service)
    with pytest.raises(OSError, match="port in use"):
        group.start()
    # The failed one is stopped too (stop is safe before start): whatever it began ends.
    assert log == ["start one", "start two", "stop bad", "stop two", "stop one"]
    assert group.stop() is True and log.count("stop one") == 1  # the first answer, again


def test_a_member_not_ready_in_time_fails_the_start() -> None:
    log: list[str] = []
    slow, after = Worker("slow", log, ready=False), Worker("after", log)
    group = ServiceGroup("operator")
    group.add(slow, ready_timeout=0.05)
    group.add(after)
    with pytest.raises(ServiceNotReady, match=r"slow did not become ready within 0\.05s"):
        group.start()
    assert log == ["start slow", "stop slow"]


def test_members_added_later_start_on_the_next_call() -> None:
    log: list[str] = []
    group = ServiceGroup("leader work")
    group.add(Worker("informers", log))
    group.start()  # a warm standby: informers only
    group.add(Worker("passes", log))
    group.start()  # leading: the passes start, the informers are not started twice
    assert group.stop()
    assert log == ["start informers", "start passes", "stop passes", "stop informers"]


def test_stop_while_starting_starts_no_more() -> None:
    log: list[str] = []
    group = ServiceGroup("operator")
    group.add(Worker("one", log))
    group.stop_event.set()
    group.start()
    assert log == [] and group.stop()


class Gated(Worker):
    """A worker whose stop waits for `go` (a slow drain), noting that it was entered."""

    def __init__(self, name: str, log: list[str]) -> None:
        super().__init__(name, log)
        self.stopping = threading.Event()
        self.go = threading.Event()

    def stop(self, timeout: float | None = None) -> bool:
        self.stopping.set()
        assert self.go.wait(10)
        return super().stop(timeout)


def test_a_second_stop_waits_for_the_first_and_returns_its_answer() -> None:
    log: list[str] = []
    first, slow = Worker("first", log), Gated("slow", log)
    group = ServiceGroup("manager")
    group.add(first)
    group.add(slow)
    group.start()
    answers: list[bool] = []
    owner = threading.Thread(target=lambda: answers.append(group.stop()))
    owner.start()
    assert slow.stopping.wait(5)
    assert group.stop(timeout=0.05) is False  # the first stop is still under way
    other = threading.Thread(target=lambda: answers.append(group.stop()))
    other.start()
    slow.go.set()
    owner.join(5)
    other.join(5)
    assert answers == [True, True]
    assert log.count("stop slow") == 1 and log.count("stop first") == 1  # stopped once


def test_await_ready_wakes_on_notify_and_reports_failure_or_end() -> None:
    changed = threading.Condition()
    state = {"ready": False, "failure": None, "finished": False}

    def wait(timeout: float | None) -> bool:
        return await_ready(
            changed,
            lambda: bool(state["ready"]),
            failure=lambda: state["failure"],  # type: ignore[return-value, arg-type]
            finished=lambda: bool(state["finished"]),
            what="Thing",
            timeout=timeout,
        )

    assert wait(0.01) is False
    result: list[bool] = []
    waiter = threading.Thread(target=lambda: result.append(wait(30)))
    waiter.start()
    with changed:
        state["ready"] = True
        changed.notify_all()
    waiter.join(10)
    assert result == [True]
    state.update(ready=False, failure=KeyError("broken"))
    with pytest.raises(KeyError, match="broken"):
        wait(1)
    state.update(failure=None, finished=True)
    with pytest.raises(RuntimeError, match="Thing stopped before becoming ready"):
        wait(1)


def test_health_server_is_a_service_and_stop_says_whether_it_ended() -> None:
    server = HealthServer(port=0)
    assert isinstance(server, Service) and server.name == "health server"
    assert server.stop() is True  # before start
    with pytest.raises(RuntimeError, match="probes"):
        server.start()
    exits: list[BaseException | None] = []
    server.probe(lambda: True, lambda: True).start(on_exit=exits.append)
    assert server.wait_ready(1) and server.healthy()
    assert server.stop(timeout=5) is True
    assert not server.healthy() and exits == []  # asked to stop: not an unexpected exit


def test_webhook_host_is_a_service() -> None:
    host = WebhookHost(lambda environ, start: [], certfile="absent", keyfile="absent")
    assert isinstance(host, Service) and host.name == "webhook server"
    assert not host.healthy() and not host.wait_ready(0) and host.stop() is True
