"""What the Lease state machine decides: Lease state x clock reading -> next step (no threads).

Each row sets the Lease up, drives the machine through a few steps on a fake clock, then
asks :meth:`LeaseMachine.plan` what to do now. Settings: lease 15 s, renew deadline 10 s,
retry period 2 s (a standby's retry wait is jittered by +-10 %).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from cloudcoil_sync.client._internal.errors import ServerError
from cloudcoil_sync.controller._internal.lease import Action, LeaseMachine

from .fakes import SETTINGS, FakeClock, FakeLeaseAPI, FakeLeaseStore

RENEWED_FOR_14_S = tuple(step for _ in range(7) for step in (2.0, "renew"))
HELD = {"holderIdentity": "other", "leaseDurationSeconds": 15}
RELEASED = {"holderIdentity": "", "leaseDurationSeconds": 1}


@dataclass(frozen=True)
class Row:
    lease: dict[str, object] | None  # the Lease in the store before the first step
    steps: tuple[str | float, ...]  # "begin", "acquire", "renew", "delete", "fault", "stop", "lose"
    action: Action  # or a number: advance the fake clock by that many seconds
    wait: tuple[float, float] = (0.0, 0.0)  # bounds of Plan.wait
    state: str | None = None  # the machine's state after planning, when checked


ROWS = {
    "not started": Row(None, (), "idle", state="idle"),
    "started, nothing seen": Row(None, ("begin",), "acquire", state="acquiring"),
    "held by another: retry period": Row(HELD, ("begin", "acquire"), "wait", (1.8, 2.2)),
    "held, later in the retry period": Row(HELD, ("begin", "acquire", 1.0), "wait", (0.8, 1.2)),
    "held, retry period over": Row(HELD, ("begin", "acquire", 2.2), "acquire"),
    "held record about to expire: wait only until then": Row(
        HELD, ("begin", "acquire", 14.0, "acquire"), "wait", (1.0, 1.0)
    ),
    "released: taken, next renewal in a retry period": Row(
        RELEASED, ("begin", "acquire"), "wait", (2.0, 2.0), "leading"
    ),
    "absent and never seen held: created and led": Row(
        None, ("begin", "acquire", 1.5), "wait", (0.5, 0.5), "leading"
    ),
    "leading, retry period over": Row(
        RELEASED, ("begin", "acquire", 2.0), "renew", state="leading"
    ),
    "leading, renewed: the next in a retry period": Row(
        RELEASED, ("begin", "acquire", 2.0, "renew", 0.5), "wait", (1.5, 1.5), "leading"
    ),
    "renewals failing: wait no longer than the renew deadline": Row(
        RELEASED,
        ("begin", "acquire", "fault", *(step for _ in range(4) for step in (2.0, "renew")), 1.5),
        "wait",
        (0.5, 0.5),
        "leading",
    ),
    "renew deadline passed without a renewal: lost": Row(
        RELEASED, ("begin", "acquire", 10.0), "lost", state="lost"
    ),
    "created after seeing it held: hold, renew, not lead": Row(
        HELD, ("begin", "acquire", "delete", "acquire"), "wait", (2.0, 2.0), "holding"
    ),
    "created after seeing it held: lead after a lease duration": Row(
        HELD,
        ("begin", "acquire", "delete", "acquire", *RENEWED_FOR_14_S),
        "wait",
        (1.0, 1.0),
        "holding",
    ),
    "created after seeing it held: quarantine over": Row(
        HELD,
        ("begin", "acquire", "delete", "acquire", *RENEWED_FOR_14_S, 1),
        "wait",
        (1.0, 1.0),
        "leading",
    ),
    "lost: nothing more to do": Row(RELEASED, ("begin", "acquire", "lose"), "lost", state="lost"),
    "stopped": Row(RELEASED, ("begin", "acquire", "stop"), "stopped", state="stopped"),
}


def drive(row: Row) -> tuple[LeaseMachine, FakeLeaseAPI]:
    store, clock = FakeLeaseStore(), FakeClock()
    if row.lease is not None:
        store.put_raw(dict(row.lease))
    api = store.api()
    machine = LeaseMachine(SETTINGS, api, clock=clock)
    for step in row.steps:
        if isinstance(step, int | float):
            clock.advance(step)
        elif step == "begin":
            machine.begin()
        elif step == "acquire":
            machine.acquire()
        elif step == "renew":
            machine.renew()
        elif step == "delete":
            store.delete()
        elif step == "fault":
            api.fault = ServerError(503, "ServiceUnavailable", "injected")
        elif step == "lose":
            machine.lose("the Lease is now held by 'thief'")
        elif step == "stop":
            machine.stop()
        else:
            raise AssertionError(step)
    return machine, api


@pytest.mark.parametrize("row", list(ROWS.values()), ids=list(ROWS))
def test_plan(row: Row) -> None:
    machine, _ = drive(row)
    plan = machine.plan()
    assert plan.action == row.action
    low, high = row.wait
    assert low <= plan.wait <= high
    if row.state is not None:
        assert machine.state == row.state


def test_failing_renewals_are_counted_and_keep_the_lease_until_the_deadline() -> None:
    machine, _ = drive(ROWS["renewals failing: wait no longer than the renew deadline"])
    assert machine.renewal_failures == 4
    assert machine.is_leader and not machine.fence.closed


def test_a_loss_closes_the_fence_and_records_why() -> None:
    machine, _ = drive(ROWS["lost: nothing more to do"])
    assert machine.lost.is_set() and machine.fence.closed
    assert machine.reason == "the Lease is now held by 'thief'"
    assert machine.deadline is None and not machine.is_leader


def test_a_standby_plans_no_write_while_the_holder_renews() -> None:
    machine, api = drive(ROWS["held by another: retry period"])
    assert api.verbs == ["get"]
    assert machine.held is False and machine.answered


def test_every_transition_moves_the_version() -> None:
    machine, _ = drive(ROWS["started, nothing seen"])
    before = machine.version
    machine.acquire()
    assert machine.version > before
    assert machine.plan().version == machine.version


def test_begin_twice_is_refused() -> None:
    machine, _ = drive(ROWS["started, nothing seen"])
    with pytest.raises(RuntimeError, match="only run once"):
        machine.begin()
