"""One acquire/renew/release step at a time, on an injected clock and an in-memory store."""

from __future__ import annotations

import re

import pytest

from cloudcoil_sync.client._internal.errors import (
    Forbidden,
    ServerError,
    TooManyRequests,
    TransportError,
)
from cloudcoil_sync.controller._internal.leader import LeaderElection, _is_fatal

from .fakes import FakeClock, FakeLeaseAPI, FakeLeaseStore

MICRO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


def make(store: FakeLeaseStore, identity: str = "me") -> tuple[LeaderElection, FakeClock]:
    election = LeaderElection(
        "lock", namespace="ops", identity=identity, lease_duration=15, renew_deadline=10
    )
    clock = FakeClock()
    election._clock = clock
    election._lease_api = store.api()
    election._state = "acquiring"
    return election, clock


def lead(election: LeaderElection, clock: FakeClock) -> None:
    """Take a released Lease (no quarantine)."""
    store = api(election).store
    if store.snapshot() is None:
        store.put_raw({"holderIdentity": "", "leaseDurationSeconds": 1})
    started = clock()
    acquired = election._try_acquire()
    assert acquired is not None and not acquired[1]
    assert election._hold(acquired[0], False, started)
    assert election.is_leader


def api(election: LeaderElection) -> FakeLeaseAPI:
    assert isinstance(election._lease_api, FakeLeaseAPI)
    return election._lease_api


def test_creates_the_lease_when_absent_and_leads_at_once() -> None:
    """The create is atomic: a 201 means nobody else holds the Lease (client-go leads too)."""
    store = FakeLeaseStore()
    election, clock = make(store)
    started = clock()
    acquired = election._try_acquire()
    assert acquired is not None and acquired[1]
    assert election._hold(acquired[0], True, started)
    spec = store.snapshot()["spec"]  # type: ignore[index]
    assert spec["holderIdentity"] == "me"
    assert spec["leaseDurationSeconds"] == 15
    assert spec["leaseTransitions"] == 0
    assert MICRO.fullmatch(spec["acquireTime"]) and MICRO.fullmatch(spec["renewTime"])
    assert [verb for verb, _ in api(election).calls] == ["get", "create"]
    assert election.is_leader and election.leading.is_set()
    assert election.deadline == started + 10
    assert not election.fence.closed


def test_a_lease_deleted_under_a_holder_it_saw_is_led_only_after_a_lease_duration() -> None:
    store = FakeLeaseStore()
    store.put_raw({"holderIdentity": "other", "leaseDurationSeconds": 15})
    election, clock = make(store)
    assert election._try_acquire() is None  # held: wait
    store.delete()
    clock.advance(2)
    started = clock()
    acquired = election._try_acquire()
    assert acquired is not None and acquired[1]
    assert election._hold(acquired[0], True, started)
    # Held (and renewed) but no leader work yet: the deleted Lease's holder may still work.
    for _ in range(7):
        assert not election.is_leader and not election.leading.is_set()
        assert election.fence.closed
        clock.advance(2)
        election._try_renew(clock())
        assert election._check_deadline()
    clock.advance(1)
    assert election._check_deadline()
    assert election.is_leader and election.leading.is_set()
    assert election.deadline == clock() - 1 + 10
    assert not election.fence.closed


def test_new_lease_given_up_if_lost_before_leading() -> None:
    store = FakeLeaseStore()
    store.put_raw({"holderIdentity": "other", "leaseDurationSeconds": 15})
    election, clock = make(store)
    assert election._try_acquire() is None
    store.delete()
    acquired = election._try_acquire()
    assert acquired is not None
    election._hold(acquired[0], True, clock())
    store.put_raw({"holderIdentity": "other", "leaseDurationSeconds": 15})
    election._try_renew(clock())
    assert election._state == "acquiring" and not election._held
    assert not election.lost.is_set()


def test_takes_a_held_lease_only_after_it_stayed_unchanged_for_its_duration() -> None:
    store = FakeLeaseStore()
    store.put_raw({"holderIdentity": "other", "leaseDurationSeconds": 15, "leaseTransitions": 4})
    election, clock = make(store)
    assert election._try_acquire() is None
    clock.advance(14.9)
    assert election._try_acquire() is None
    assert [verb for verb, _ in api(election).calls] == ["get", "get"]
    clock.advance(0.1)
    acquired = election._try_acquire()
    assert acquired is not None
    taken, created = acquired
    assert not created
    assert taken["spec"]["holderIdentity"] == "me"
    assert taken["spec"]["leaseTransitions"] == 5
    assert MICRO.fullmatch(taken["spec"]["acquireTime"])


def test_a_renewing_holder_is_never_taken_over() -> None:
    store = FakeLeaseStore()
    election, clock = make(store)
    for second in range(40):
        stamp = f"2026-01-01T00:{second:02d}:00.000000Z"
        store.put_raw({"holderIdentity": "other", "leaseDurationSeconds": 15, "renewTime": stamp})
        assert election._try_acquire() is None
        clock.advance(2)


def test_losing_the_optimistic_race_is_not_an_error() -> None:
    store = FakeLeaseStore()
    store.put_raw({"holderIdentity": "", "leaseDurationSeconds": 1})
    election, _ = make(store)

    def holder_renews_first(verb: str) -> None:
        if verb == "replace":
            store.put_raw({"holderIdentity": "other", "leaseDurationSeconds": 15})

    api(election).before = holder_renews_first
    assert election._try_acquire() is None
    assert store.snapshot()["spec"]["holderIdentity"] == "other"  # type: ignore[index]


def test_create_race_lost_to_another_candidate() -> None:
    store = FakeLeaseStore()
    election, _ = make(store)

    def other_creates_first(verb: str) -> None:
        if verb == "create":
            store.put_raw({"holderIdentity": "other", "leaseDurationSeconds": 15})

    api(election).before = other_creates_first
    assert election._try_acquire() is None


def test_renew_deadline_is_measured_from_the_request_start() -> None:
    store = FakeLeaseStore()
    election, clock = make(store)
    lead(election, clock)
    started = clock()
    api(election).before = lambda verb: clock.advance(4)  # a slow answer
    election._try_renew(started)
    assert election.deadline == started + 10
    assert api(election).calls[-1] == ("replace", 5.0)


def test_request_timeout_never_outlasts_the_deadline() -> None:
    store = FakeLeaseStore()
    election, clock = make(store)
    lead(election, clock)
    clock.advance(8)
    election._try_renew(clock())
    assert api(election).calls[-1] == ("replace", pytest.approx(2.0))


def test_leadership_ends_at_the_deadline_and_a_late_success_is_ignored() -> None:
    store = FakeLeaseStore()
    election, clock = make(store)
    lead(election, clock)
    clock.advance(9.9)
    assert election.is_leader
    started = clock()

    def supervisor_sees_the_deadline_pass(verb: str) -> None:
        clock.advance(0.2)
        assert not election._check_deadline()

    api(election).before = supervisor_sees_the_deadline_pass
    election._try_renew(started)  # succeeds on the server, after the loss was declared
    assert not election.is_leader
    assert election.lost.is_set()
    # The renewal that started before the deadline must not revive leadership.
    assert election._state == "lost" and election.deadline is None


def test_a_success_started_in_time_extends_the_deadline_from_its_start() -> None:
    store = FakeLeaseStore()
    election, clock = make(store)
    lead(election, clock)
    clock.advance(9.9)
    started = clock()
    api(election).before = lambda verb: clock.advance(0.2)
    election._try_renew(started)
    assert election.is_leader and election.deadline == started + 10


def test_deleted_lease_means_loss() -> None:
    store = FakeLeaseStore()
    election, clock = make(store)
    lead(election, clock)
    store.delete()
    election._try_renew(clock())
    assert election.lost.is_set() and "deleted" in election._reason


def test_stolen_lease_means_loss() -> None:
    store = FakeLeaseStore()
    election, clock = make(store)
    lead(election, clock)
    store.put_raw({"holderIdentity": "thief", "leaseDurationSeconds": 15})
    election._try_renew(clock())
    assert election.lost.is_set() and "thief" in election._reason


def test_recreated_lease_with_our_name_means_loss() -> None:
    store = FakeLeaseStore()
    election, clock = make(store)
    lead(election, clock)
    store.delete()
    store.put_raw({"holderIdentity": "me", "leaseDurationSeconds": 15})
    election._try_renew(clock())
    assert election.lost.is_set() and "re-created" in election._reason


def test_unrelated_write_conflict_is_retried_against_the_newer_lease() -> None:
    store = FakeLeaseStore()
    election, clock = make(store)
    lead(election, clock)
    store.put_raw({**store.snapshot()["spec"], "extra": "label"})  # type: ignore[index]
    clock.advance(1)
    started = clock()
    election._try_renew(started)
    assert election.is_leader and election.deadline == started + 10
    assert [verb for verb, _ in api(election).calls][-3:] == ["replace", "get", "replace"]


def test_release_only_when_still_ours() -> None:
    store = FakeLeaseStore()
    election, clock = make(store)
    lead(election, clock)
    election._release()
    spec = store.snapshot()["spec"]  # type: ignore[index]
    assert spec["holderIdentity"] == "" and spec["leaseDurationSeconds"] == 1
    assert spec["leaseTransitions"] == 1  # release keeps the count

    store = FakeLeaseStore()
    election, clock = make(store)
    lead(election, clock)
    store.put_raw({"holderIdentity": "successor", "leaseDurationSeconds": 15})
    writes = len(store.writes)
    election._release()
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
    assert _is_fatal(error) is fatal


def test_the_fence_follows_renewals_and_closes_at_the_deadline_by_itself() -> None:
    store = FakeLeaseStore()
    election, clock = make(store)
    assert election.fence.closed  # not leading yet
    lead(election, clock)
    assert not election.fence.closed
    clock.advance(6)
    election._try_renew(clock())
    assert election.fence.deadline == clock() + 10
    clock.advance(9.9)
    assert not election.fence.closed
    clock.advance(0.1)  # a pause: nobody ran the deadline check, the fence closes anyway
    assert election.fence.closed and election.is_leader is False
    # A renewal that started past the deadline does not reopen it; it declares the loss.
    election._try_renew(clock())
    assert election.fence.closed
    assert not election._check_deadline() and election.lost.is_set()
