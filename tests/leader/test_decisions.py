"""One acquire/renew/release step at a time: the Lease state machine on an injected clock
and an in-memory store, no threads."""

from __future__ import annotations

import re

import pytest

from cloudcoil_sync.client._internal.errors import (
    Forbidden,
    ServerError,
    TooManyRequests,
    TransportError,
)
from cloudcoil_sync.controller._internal.lease import LeaseMachine
from cloudcoil_sync.controller._internal.lease_record import is_fatal

from .fakes import SETTINGS, FakeClock, FakeLeaseAPI, FakeLeaseStore

MICRO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


def make(store: FakeLeaseStore) -> tuple[LeaseMachine, FakeClock]:
    clock = FakeClock()
    machine = LeaseMachine(SETTINGS, store.api(), clock=clock)
    machine.begin()
    return machine, clock


def api(machine: LeaseMachine) -> FakeLeaseAPI:
    assert isinstance(machine.api, FakeLeaseAPI)
    return machine.api


def lead(machine: LeaseMachine) -> None:
    """Take a released Lease (no quarantine)."""
    store = api(machine).store
    if store.snapshot() is None:
        store.put_raw({"holderIdentity": "", "leaseDurationSeconds": 1})
    assert machine.acquire()
    assert api(machine).verbs[-1] == "replace"
    assert machine.is_leader


def test_creates_the_lease_when_absent_and_leads_at_once() -> None:
    """The create is atomic: a 201 means nobody else holds the Lease (client-go leads too)."""
    store = FakeLeaseStore()
    machine, clock = make(store)
    started = clock()
    assert machine.acquire()
    spec = store.snapshot()["spec"]  # type: ignore[index]
    assert spec["holderIdentity"] == "me"
    assert spec["leaseDurationSeconds"] == 15
    assert spec["leaseTransitions"] == 0
    assert MICRO.fullmatch(spec["acquireTime"]) and MICRO.fullmatch(spec["renewTime"])
    assert [verb for verb, _ in api(machine).calls] == ["get", "create"]
    assert machine.is_leader and machine.leading.is_set()
    assert machine.deadline == started + 10
    assert not machine.fence.closed


def test_a_lease_deleted_under_a_holder_it_saw_is_led_only_after_a_lease_duration() -> None:
    store = FakeLeaseStore()
    store.put_raw({"holderIdentity": "other", "leaseDurationSeconds": 15})
    machine, clock = make(store)
    assert not machine.acquire()  # held: wait
    store.delete()
    clock.advance(2)
    assert machine.acquire()  # created and held, but not led on yet
    assert api(machine).verbs[-1] == "create" and machine.state == "holding"
    # Held (and renewed) but no leader work yet: the deleted Lease's holder may still work.
    for _ in range(7):
        assert not machine.is_leader and not machine.leading.is_set()
        assert machine.fence.closed
        clock.advance(2)
        machine.renew()
        assert machine.check()
    clock.advance(1)
    assert machine.check()
    assert machine.is_leader and machine.leading.is_set()
    assert machine.deadline == clock() - 1 + 10
    assert not machine.fence.closed


def test_new_lease_given_up_if_lost_before_leading() -> None:
    store = FakeLeaseStore()
    store.put_raw({"holderIdentity": "other", "leaseDurationSeconds": 15})
    machine, _ = make(store)
    assert not machine.acquire()
    store.delete()
    machine.acquire()
    assert machine.state == "holding" and machine.held
    store.put_raw({"holderIdentity": "other", "leaseDurationSeconds": 15})
    machine.renew()
    assert machine.state == "acquiring" and not machine.held
    assert not machine.lost.is_set()


def test_takes_a_held_lease_only_after_it_stayed_unchanged_for_its_duration() -> None:
    store = FakeLeaseStore()
    store.put_raw({"holderIdentity": "other", "leaseDurationSeconds": 15, "leaseTransitions": 4})
    machine, clock = make(store)
    assert not machine.acquire()
    clock.advance(14.9)
    assert not machine.acquire()
    assert [verb for verb, _ in api(machine).calls] == ["get", "get"]
    clock.advance(0.1)
    assert machine.acquire()
    assert api(machine).verbs[-1] == "replace"
    taken = machine.lease
    assert taken is not None
    assert taken["spec"]["holderIdentity"] == "me"
    assert taken["spec"]["leaseTransitions"] == 5
    assert MICRO.fullmatch(taken["spec"]["acquireTime"])


def test_a_renewing_holder_is_never_taken_over() -> None:
    store = FakeLeaseStore()
    machine, clock = make(store)
    for second in range(40):
        stamp = f"2026-01-01T00:{second:02d}:00.000000Z"
        store.put_raw({"holderIdentity": "other", "leaseDurationSeconds": 15, "renewTime": stamp})
        assert not machine.acquire()
        clock.advance(2)


def test_losing_the_optimistic_race_is_not_an_error() -> None:
    store = FakeLeaseStore()
    store.put_raw({"holderIdentity": "", "leaseDurationSeconds": 1})
    machine, _ = make(store)

    def holder_renews_first(verb: str) -> None:
        if verb == "replace":
            store.put_raw({"holderIdentity": "other", "leaseDurationSeconds": 15})

    api(machine).before = holder_renews_first
    assert not machine.acquire()
    assert store.snapshot()["spec"]["holderIdentity"] == "other"  # type: ignore[index]


def test_create_race_lost_to_another_candidate() -> None:
    store = FakeLeaseStore()
    machine, _ = make(store)

    def other_creates_first(verb: str) -> None:
        if verb == "create":
            store.put_raw({"holderIdentity": "other", "leaseDurationSeconds": 15})

    api(machine).before = other_creates_first
    assert not machine.acquire()


def test_renew_deadline_is_measured_from_the_request_start() -> None:
    store = FakeLeaseStore()
    machine, clock = make(store)
    lead(machine)
    started = clock()
    api(machine).before = lambda verb: clock.advance(4)  # a slow answer
    machine.renew()
    assert machine.deadline == started + 10
    assert api(machine).calls[-1] == ("replace", 5.0)


def test_request_timeout_never_outlasts_the_deadline() -> None:
    store = FakeLeaseStore()
    machine, clock = make(store)
    lead(machine)
    clock.advance(8)
    machine.renew()
    assert api(machine).calls[-1] == ("replace", pytest.approx(2.0))


def test_leadership_ends_at_the_deadline_and_a_late_success_is_ignored() -> None:
    store = FakeLeaseStore()
    machine, clock = make(store)
    lead(machine)
    clock.advance(9.9)
    assert machine.is_leader

    def supervisor_sees_the_deadline_pass(verb: str) -> None:
        clock.advance(0.2)
        assert not machine.check()

    api(machine).before = supervisor_sees_the_deadline_pass
    machine.renew()  # succeeds on the server, after the loss was declared
    assert not machine.is_leader
    assert machine.lost.is_set()
    # The renewal that started before the deadline must not revive leadership.
    assert machine.state == "lost" and machine.deadline is None


def test_a_success_started_in_time_extends_the_deadline_from_its_start() -> None:
    store = FakeLeaseStore()
    machine, clock = make(store)
    lead(machine)
    clock.advance(9.9)
    started = clock()
    api(machine).before = lambda verb: clock.advance(0.2)
    machine.renew()
    assert machine.is_leader and machine.deadline == started + 10


def test_deleted_lease_means_loss() -> None:
    store = FakeLeaseStore()
    machine, _ = make(store)
    lead(machine)
    store.delete()
    machine.renew()
    assert machine.lost.is_set() and "deleted" in machine.reason


def test_stolen_lease_means_loss() -> None:
    store = FakeLeaseStore()
    machine, _ = make(store)
    lead(machine)
    store.put_raw({"holderIdentity": "thief", "leaseDurationSeconds": 15})
    machine.renew()
    assert machine.lost.is_set() and "thief" in machine.reason


def test_recreated_lease_with_our_name_means_loss() -> None:
    store = FakeLeaseStore()
    machine, _ = make(store)
    lead(machine)
    store.delete()
    store.put_raw({"holderIdentity": "me", "leaseDurationSeconds": 15})
    machine.renew()
    assert machine.lost.is_set() and "re-created" in machine.reason


def test_unrelated_write_conflict_is_retried_against_the_newer_lease() -> None:
    store = FakeLeaseStore()
    machine, clock = make(store)
    lead(machine)
    store.put_raw({**store.snapshot()["spec"], "extra": "label"})  # type: ignore[index]
    clock.advance(1)
    started = clock()
    machine.renew()
    assert machine.is_leader and machine.deadline == started + 10
    assert [verb for verb, _ in api(machine).calls][-3:] == ["replace", "get", "replace"]


def test_release_only_when_still_ours() -> None:
    store = FakeLeaseStore()
    machine, _ = make(store)
    lead(machine)
    machine.release()
    spec = store.snapshot()["spec"]  # type: ignore[index]
    assert spec["holderIdentity"] == "" and spec["leaseDurationSeconds"] == 1
    assert spec["leaseTransitions"] == 1  # release keeps the count

    store = FakeLeaseStore()
    machine, _ = make(store)
    lead(machine)
    store.put_raw({"holderIdentity": "successor", "leaseDurationSeconds": 15})
    writes = len(store.writes)
    machine.release()
    assert store.snapshot()["spec"]["holderIdentity"] == "successor"  # type: ignore[index]
    assert len(store.writes) == writes


@pytest.mark.parametrize(
    ("error", "fatal"),
    [
        (Forbidden(403, "Forbidden", "no"), True),
        (ServerError(500, "InternalError", "x"), False),
        (ServerError(503, "ServiceUnavailable", "x"), False),
        (TooManyRequests(429, "TooManyRequests", "x"), False),
        (TransportError("reset"), False),
        (RuntimeError("bug"), True),
    ],
)
def test_error_classification(error: BaseException, fatal: bool) -> None:
    assert is_fatal(error) is fatal


def test_the_fence_follows_renewals_and_closes_at_the_deadline_by_itself() -> None:
    store = FakeLeaseStore()
    machine, clock = make(store)
    assert machine.fence.closed  # not leading yet
    lead(machine)
    assert not machine.fence.closed
    clock.advance(6)
    machine.renew()
    assert machine.fence.deadline == clock() + 10
    clock.advance(9.9)
    assert not machine.fence.closed
    clock.advance(0.1)  # a pause: nobody ran the deadline check, the fence closes anyway
    assert machine.fence.closed and machine.is_leader is False
    # A renewal that started past the deadline does not reopen it; it declares the loss.
    machine.renew()
    assert machine.fence.closed
    assert not machine.check() and machine.lost.is_set()
