"""LeaderElection as a `Service`: start(on_exit), stop(timeout) -> bool, wait_ready, healthy.

Real threads and time against the in-memory Lease store (injected with ``lease_api=``).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from waiting import wait_until

from cloudcoil_sync._internal.service import Service
from cloudcoil_sync.client._internal.errors import Forbidden
from cloudcoil_sync.controller._internal.leader import LeaderElection, LeadershipLost

from .fakes import FakeClock, FakeLeaseAPI, FakeLeaseStore

SHORT: dict[str, Any] = {"lease_duration": 1, "renew_deadline": 0.6, "retry_period": 0.1}
# A standby polling at this period would notice nothing within any wait below.
SLOW: dict[str, Any] = {"lease_duration": 40, "renew_deadline": 30, "retry_period": 20}


class Exits:
    """An on_exit callback that records what ended the service and on which thread."""

    def __init__(self) -> None:
        self.errors: list[BaseException | None] = []
        self.threads: list[str] = []
        self.called = threading.Event()

    def __call__(self, error: BaseException | None) -> None:
        self.errors.append(error)
        self.threads.append(threading.current_thread().name)
        self.called.set()


def election(api: FakeLeaseAPI, identity: str = "a", **timing: Any) -> LeaderElection:
    return LeaderElection(
        "lock", namespace="ops", identity=identity, lease_api=api, **(timing or SHORT)
    )


def test_it_is_a_service() -> None:
    service: Service = election(FakeLeaseStore().api())
    assert isinstance(service, Service)
    assert service.name == "lock"
    assert not service.healthy() and not service.wait_ready(0)
    assert service.stop() is True  # never started: nothing to join
    with pytest.raises(RuntimeError, match="only run once"):
        service.start()  # a stopped service does not start afterwards


def test_start_on_exit_lead_then_stop_releases_and_reports_true() -> None:
    store = FakeLeaseStore()
    exits = Exits()
    service = election(store.api())
    service.start(exits)  # the Service form: on_exit as the first argument
    assert service.wait_ready(5) and service.wait_leader(5)
    assert service.healthy() and service.is_leader
    assert service.stop(timeout=5) is True
    assert store.snapshot()["spec"]["holderIdentity"] == ""  # type: ignore[index]
    assert not service.healthy()
    assert exits.errors == []  # asked to stop: not an exit
    with pytest.raises(RuntimeError, match="only run once"):
        service.start()


def test_a_standby_is_ready_and_healthy_without_leading() -> None:
    store = FakeLeaseStore()
    store.put_raw({"holderIdentity": "other", "leaseDurationSeconds": 40})
    service = election(store.api(), **SLOW)
    service.start(on_exit=Exits())
    assert service.wait_ready(5)
    assert service.healthy() and not service.is_leader and not service.leading.is_set()
    assert service.stop(timeout=5) is True  # wakes the standby's 20 s wait at once
    assert store.snapshot()["spec"]["holderIdentity"] == "other"  # type: ignore[index]


def test_loss_calls_on_exit_from_the_lease_thread() -> None:
    store = FakeLeaseStore()
    exits = Exits()
    service = election(store.api())
    service.start(on_exit=exits)
    assert service.wait_leader(5)
    store.put_raw({"holderIdentity": "thief", "leaseDurationSeconds": 1})
    assert exits.called.wait(5)
    [error] = exits.errors
    assert isinstance(error, LeadershipLost) and "thief" in str(error)
    assert exits.threads == ["cloudcoil-lease-lock"]
    assert not service.healthy() and service.lost.is_set()
    assert service.stop(timeout=5) is True
    assert store.snapshot()["spec"]["holderIdentity"] == "thief"  # type: ignore[index]


def test_a_fatal_error_calls_on_exit_and_ends_readiness() -> None:
    api = FakeLeaseStore().api()
    api.fault = Forbidden(403, "Forbidden", "leases is forbidden")
    exits = Exits()
    service = election(api)
    service.start(on_exit=exits)
    assert exits.called.wait(5)
    assert isinstance(exits.errors[0], Forbidden)
    assert not service.wait_ready(5) and not service.healthy()
    assert isinstance(service.failure, Forbidden)
    assert service.stop(timeout=5) is True


def test_start_refuses_what_is_neither_a_config_nor_a_callback() -> None:
    with pytest.raises(TypeError, match="takes an on_exit callback and a Config"):
        election(FakeLeaseStore().api()).start(5)  # type: ignore[arg-type]


def test_stop_with_a_timeout_waits_for_a_running_run_to_release() -> None:
    store = FakeLeaseStore()
    service = election(store.api())
    working = threading.Event()

    def work(stop: threading.Event) -> None:
        working.set()
        stop.wait(10)

    thread = threading.Thread(target=service.run, args=(work,))
    thread.start()
    assert working.wait(5)
    assert service.stop(timeout=5) is True  # run() drained, released, joined the lease thread
    assert store.snapshot()["spec"]["holderIdentity"] == ""  # type: ignore[index]
    thread.join(5)
    assert not thread.is_alive()


@pytest.mark.parametrize("lead", [True, False], ids=["leader", "standby"])
def test_a_callers_stop_event_ends_run_without_waiting_out_a_period(lead: bool) -> None:
    """With 20 s retries and a 30 s renew deadline, only a notification can end run() here."""
    store = FakeLeaseStore()
    if not lead:
        store.put_raw({"holderIdentity": "other", "leaseDurationSeconds": 40})
    service = election(store.api(), **SLOW)
    stop = threading.Event()
    thread = threading.Thread(
        target=service.run, args=(lambda work_stop: work_stop.wait(60),), kwargs={"stop": stop}
    )
    thread.start()
    assert wait_until(lambda: service.leading.is_set() if lead else service.wait_ready(0), 5)
    stop.set()
    thread.join(5)
    assert not thread.is_alive()
    holder = store.snapshot()["spec"]["holderIdentity"]  # type: ignore[index]
    assert holder == ("" if lead else "other")


def test_stop_called_from_on_exit_does_not_deadlock_the_lease_thread() -> None:
    """A group runner may stop a service from its exit callback (on the lease thread)."""
    store = FakeLeaseStore()
    answers: list[bool] = []
    service = election(store.api())
    service.start(on_exit=lambda error: answers.append(service.stop(timeout=5)))
    assert service.wait_leader(5)
    store.put_raw({"holderIdentity": "thief", "leaseDurationSeconds": 1})
    assert wait_until(lambda: answers == [False], 5)  # the thread cannot join itself
    assert service.stop(timeout=5) is True  # and it ended once the callback returned


def test_the_injected_clock_times_leadership_and_the_fence() -> None:
    clock, store = FakeClock(), FakeLeaseStore()
    service = LeaderElection(
        "lock", namespace="ops", identity="a", lease_api=store.api(), clock=clock
    )
    service.start()
    assert service.wait_leader(5)
    assert service.deadline == 1000.0 + 10 and not service.fence.closed
    clock.advance(10)  # the renew deadline passed on the injected clock, not on the real one
    assert not service.is_leader and service.fence.closed
    assert service.stop(timeout=5) is True


def test_run_after_a_loss_is_refused() -> None:
    store = FakeLeaseStore()
    service = election(store.api())
    service.start()
    assert service.wait_leader(5)
    store.put_raw({"holderIdentity": "thief", "leaseDurationSeconds": 1})
    assert service.lost.wait(5)
    with pytest.raises(RuntimeError, match="only run once"):
        service.run(lambda stop: pytest.fail("work ran after the loss"))
    assert service.stop(timeout=5) is True


def test_when_leading_is_called_once_from_the_lease_thread() -> None:
    store = FakeLeaseStore()
    service = election(store.api())
    threads: list[str] = []
    called = threading.Event()

    def leading() -> None:
        threads.append(threading.current_thread().name)
        called.set()

    service.when_leading(leading)
    service.start(Exits())
    assert called.wait(5) and threads == ["cloudcoil-lease-lock"]
    left = service.time_left()
    assert service.check() and left is not None and 0 < left <= SHORT["renew_deadline"]
    assert service.stop(timeout=5) is True
    assert threads == ["cloudcoil-lease-lock"] and service.time_left() is None
    with pytest.raises(RuntimeError, match="before start"):
        service.when_leading(leading)


def test_abandon_leaves_the_lease_to_expire() -> None:
    store = FakeLeaseStore()
    service = election(store.api())
    service.start(Exits())
    assert service.wait_leader(5)
    service.abandon()  # the leader work did not stop: no release
    assert service.stop(timeout=5) is True
    assert store.snapshot()["spec"]["holderIdentity"] == "a"  # type: ignore[index]
    assert service.fence.closed
