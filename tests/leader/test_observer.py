"""The takeover rule, as pure bookkeeping on an injected clock."""

from __future__ import annotations

from typing import Any

from cloudcoil_sync.controller._internal.leader import LeaseObserver


def lease(holder: str, *, renew: str = "2026-01-01T00:00:00.000000Z", **spec: Any) -> dict:
    return {
        "metadata": {"uid": spec.pop("uid", "u1"), "resourceVersion": "1"},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": spec.pop("duration", 15),
            "acquireTime": "2026-01-01T00:00:00.000000Z",
            "renewTime": renew,
            "leaseTransitions": 0,
        },
    }


def observe(observer: LeaseObserver, record: dict | None, now: float) -> float:
    observer.observe(record, now, fallback=10.0)
    return observer.wait_before_acquire(record, "me", now, fallback=10.0)


def test_held_record_must_stay_unchanged_for_its_duration_on_the_local_clock() -> None:
    observer = LeaseObserver()
    held = lease("other")
    assert observe(observer, held, 100.0) == 15.0
    assert observe(observer, held, 110.0) == 5.0
    assert observe(observer, held, 114.9) > 0
    assert observe(observer, held, 115.0) == 0.0


def test_any_change_of_the_record_restarts_the_wait() -> None:
    observer = LeaseObserver()
    assert observe(observer, lease("other"), 100.0) == 15.0
    renewed = lease("other", renew="2026-01-01T00:00:02.000000Z")
    assert observe(observer, renewed, 114.0) == 15.0
    assert observe(observer, renewed, 129.0) == 0.0
    recreated = lease("other", renew="2026-01-01T00:00:02.000000Z", uid="u2")
    assert observe(observer, recreated, 129.0) == 15.0


def test_remote_timestamps_are_ignored() -> None:
    # renewTime decades in the past (skewed clock) does not make the record expired.
    observer = LeaseObserver()
    stale = lease("other", renew="1990-01-01T00:00:00.000000Z")
    assert observe(observer, stale, 100.0) == 15.0
    # ...and one in the future does not extend it.
    observer = LeaseObserver()
    future = lease("other", renew="2099-01-01T00:00:00.000000Z")
    assert observe(observer, future, 100.0) == 15.0
    assert observe(observer, future, 115.0) == 0.0


def test_released_or_own_record_may_be_taken_at_once() -> None:
    observer = LeaseObserver()
    assert observe(observer, lease(""), 100.0) == 0.0
    assert observe(observer, lease("me"), 101.0) == 0.0


def test_absent_lease_never_seen_held_may_be_created_and_led_at_once() -> None:
    observer = LeaseObserver()
    assert observe(observer, None, 100.0) == 0.0
    assert observer.quarantine(10.0) == 0.0
    observe(observer, lease("", duration=1), 101.0)  # a released record: nobody held it
    assert observer.quarantine(10.0) == 0.0


def test_absent_lease_seen_held_before_is_held_for_a_lease_duration() -> None:
    observer = LeaseObserver()
    observe(observer, lease("other", duration=5), 100.0)
    assert observe(observer, None, 101.0) == 0.0
    assert observer.quarantine(10.0) == 10.0  # never shorter than our own duration


def test_quarantine_covers_the_longest_duration_a_holder_used() -> None:
    observer = LeaseObserver()
    observe(observer, lease("other", duration=30), 100.0)
    observe(observer, lease("", duration=1), 101.0)
    assert observe(observer, None, 102.0) == 0.0
    assert observer.quarantine(10.0) == 30.0


def test_invalid_duration_falls_back_to_our_own_setting() -> None:
    observer = LeaseObserver()
    for bad in (0, -1, None, "15", True):
        observer = LeaseObserver()
        assert observe(observer, lease("other", duration=bad), 100.0) == 10.0
