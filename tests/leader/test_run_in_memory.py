"""LeaderElection.run with real threads and time against the in-memory Lease store."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Gauge, generate_latest
from waiting import wait_until

from cloudcoil_sync.client._internal.errors import Forbidden, ServerError
from cloudcoil_sync.controller._internal.leader import LeaderElection, LeadershipLost

from .fakes import FakeLeaseAPI, FakeLeaseStore
from .harness import Recorder, Replica, describe

SHORT: dict[str, Any] = {"lease_duration": 1, "renew_deadline": 0.6, "retry_period": 0.1}


# The Lease API of each elector built here, by identity (the tests inject faults through it).
APIS: dict[str, FakeLeaseAPI] = {}


def elector(store: FakeLeaseStore, identity: str) -> LeaderElection:
    api = APIS[identity] = store.api()
    return LeaderElection("lock", namespace="ops", identity=identity, lease_api=api, **SHORT)


def api_of(election: LeaderElection | None) -> FakeLeaseAPI:
    assert election is not None
    return APIS[election.identity]


def fault(election: LeaderElection | None) -> None:
    api_of(election).fault = ServerError(503, "ServiceUnavailable", "injected")


def _saw_a_holder(replica: Replica) -> bool:
    elector = replica.live()  # not a stopping one: its successor would not have seen it
    return elector is not None and api_of(elector).saw_holder


@pytest.mark.parametrize("replica_count", [2, 3])
def test_forced_handoffs_never_overlap(replica_count: int) -> None:
    store = FakeLeaseStore()
    recorder = Recorder()
    generation = Counter[int]()

    def make(index: int) -> LeaderElection:
        generation[index] += 1
        return elector(store, f"replica-{index}-{generation[index]}")

    replicas = [Replica(index, recorder, make) for index in range(replica_count)]
    for replica in replicas:
        replica.start()
    kinds = ["restart", "restart", "delete", "fault"]
    faulted = []
    try:
        for round_ in range(12):
            assert recorder.wait_for(lambda: recorder.current() is not None, 10)
            current = recorder.current()
            assert current is not None
            started = recorder.leaders_started()
            kind = kinds[round_ % len(kinds)]
            if kind == "restart":
                replicas[current.replica].restart()
            elif kind == "delete":
                # As in test_emulator: a candidate that saw the Lease held waits a lease
                # duration before leading on one it creates; one that never saw a holder (a
                # replica restarted a moment ago) leads at once, as client-go does: that case
                # is documented, not exercised here.
                others = [r for r in replicas if r.index != current.replica]
                assert wait_until(lambda: all(_saw_a_holder(r) for r in others), 15)  # noqa: B023
                store.delete()
            else:
                fault(replicas[current.replica].elector)
                faulted.append(current)
            if not recorder.wait_new_leader(started, 10) or recorder.violations:
                pytest.fail(f"after {kind}:\n{describe(replicas)}")
    finally:
        for replica in replicas:
            replica.shutdown()
    recorder.assert_never_overlapped()
    assert all(not replica.errors for replica in replicas)
    assert len({interval.replica for interval in recorder.intervals}) > 1
    for interval in faulted:
        # Renewals failed: the work was told to stop at the renew deadline, not before, and
        # returned before the next leader began (the recorder saw no overlap above).
        assert interval.deadline_at_end is not None and interval.stop_signalled is not None
        assert interval.deadline_at_end <= interval.stop_signalled <= interval.end
        later = [i for i in recorder.intervals if i.start > interval.start]
        assert all(interval.end <= i.start for i in later)


def test_standby_never_runs_work_and_stop_releases_for_a_quick_handoff() -> None:
    store = FakeLeaseStore()
    first, second = elector(store, "a"), elector(store, "b")
    ran: list[str] = []
    leading = threading.Event()

    def work_of(name: str) -> object:
        def work(stop: threading.Event) -> None:
            ran.append(name)
            leading.set()
            stop.wait(10)

        return work

    stop_a, stop_b = threading.Event(), threading.Event()
    thread_a = threading.Thread(target=first.run, args=(work_of("a"),), kwargs={"stop": stop_a})
    thread_a.start()
    assert leading.wait(5)
    thread_b = threading.Thread(target=second.run, args=(work_of("b"),), kwargs={"stop": stop_b})
    thread_b.start()
    # b polls every ~0.1 s for 0.5 s: it must stay standby while a renews.
    assert not second.wait_leader(0.5)
    assert ran == ["a"] and not second.is_leader
    leading.clear()
    calls = api_of(second).calls
    seen = len(calls)
    stop_a.set()
    assert leading.wait(5)
    # Released: b's next look found it free and its next call took it (waiting out the
    # lease would show as a run of reads before the write).
    verbs = [verb for verb, _ in calls[seen:]]
    assert "replace" in verbs[:3] and verbs.count("get") <= 2, verbs
    assert ran == ["a", "b"]
    stop_b.set()
    thread_a.join(5)
    thread_b.join(5)
    assert store.snapshot()["spec"]["holderIdentity"] == ""  # type: ignore[index]


def test_forbidden_is_fatal_for_a_candidate() -> None:
    store = FakeLeaseStore()
    election = elector(store, "a")
    api_of(election).fault = Forbidden(403, "Forbidden", "leases is forbidden")
    with pytest.raises(Forbidden):
        election.run(lambda stop: pytest.fail("work ran"), stop=threading.Event())


def test_forbidden_while_leading_stops_the_work_then_raises() -> None:
    store = FakeLeaseStore()
    election = elector(store, "a")
    stopped = threading.Event()

    def work(stop: threading.Event) -> None:
        api_of(election).fault = Forbidden(403, "Forbidden", "no update")
        stop.wait(10)
        stopped.set()

    with pytest.raises(Forbidden):
        election.run(work)
    assert stopped.is_set() and election.lost.is_set()


def test_loss_joins_the_work_before_releasing_and_raises_leadership_lost() -> None:
    store = FakeLeaseStore()
    election = elector(store, "a")
    order: list[str] = []

    def work(stop: threading.Event) -> None:
        store.put_raw({"holderIdentity": "thief", "leaseDurationSeconds": 1})
        stop.wait(10)
        order.append("work stopped")

    api_of(election).before = lambda verb: order.append(verb)
    with pytest.raises(LeadershipLost, match="thief"):
        election.run(work)
    assert order.index("work stopped") < len(order) - 1
    # After the loss: one GET to check ownership, and no write (the thief keeps it).
    assert order[order.index("work stopped") + 1 :] == ["get"]
    assert store.snapshot()["spec"]["holderIdentity"] == "thief"  # type: ignore[index]


def test_work_exception_is_raised_after_release() -> None:
    store = FakeLeaseStore()
    election = elector(store, "a")

    def work(stop: threading.Event) -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError):
        election.run(work)
    assert store.snapshot()["spec"]["holderIdentity"] == ""  # type: ignore[index]


def test_work_that_never_stops_keeps_the_lease_unreleased() -> None:
    store = FakeLeaseStore()
    election = elector(store, "a")
    release_work = threading.Event()
    stop = threading.Event()

    def work(work_stop: threading.Event) -> None:
        stop.set()
        release_work.wait(10)

    try:
        with pytest.raises(RuntimeError, match="did not stop within"):
            election.run(work, stop=stop, join_timeout=0.3)
        assert store.snapshot()["spec"]["holderIdentity"] == "a"  # type: ignore[index]
    finally:
        release_work.set()


def test_runs_once() -> None:
    election = elector(FakeLeaseStore(), "a")
    stop = threading.Event()
    stop.set()
    election.run(lambda s: None, stop=stop)
    with pytest.raises(RuntimeError, match="only run once"):
        election.start()


def test_stop_from_another_thread_while_running_drains_then_releases() -> None:
    store = FakeLeaseStore()
    election = elector(store, "a")
    working = threading.Event()
    drained: list[str] = []

    def work(stop: threading.Event) -> None:
        working.set()
        stop.wait(10)
        assert election.is_leader  # still renewing while draining
        drained.append(store.snapshot()["spec"]["holderIdentity"])  # type: ignore[index]

    thread = threading.Thread(target=election.run, args=(work,))
    thread.start()
    assert working.wait(5)
    election.stop()  # asks run() to stop; run() releases after the work returns
    thread.join(5)
    assert not thread.is_alive()
    assert drained == ["a"]
    assert store.snapshot()["spec"]["holderIdentity"] == ""  # type: ignore[index]
    with pytest.raises(RuntimeError, match="only run once"):
        election.run(work)


def test_master_status_gauge_follows_leadership() -> None:
    store = FakeLeaseStore()
    registry = CollectorRegistry()
    first, other = elector(store, "a"), LeaderElection("other-lock", **SHORT)
    first.bind_metrics(registry)
    other.bind_metrics(registry)  # a second Lease name shares the metric family
    seen: list[bytes] = []

    def work(stop: threading.Event) -> None:
        seen.append(generate_latest(registry))

    first.run(work)
    assert b'leader_election_master_status{name="lock"} 1.0' in seen[0]
    assert b'leader_election_master_status{name="other-lock"} 0.0' in seen[0]
    assert b'leader_election_master_status{name="lock"} 0.0' in generate_latest(registry)


def test_master_status_gauge_shares_an_existing_family() -> None:
    registry = CollectorRegistry()
    Gauge("leader_election_master_status", "declared elsewhere", ["name"], registry=registry)
    election = elector(FakeLeaseStore(), "a")
    election.bind_metrics(registry)
    assert b'leader_election_master_status{name="lock"} 0.0' in generate_latest(registry)
