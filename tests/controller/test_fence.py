"""Write fences (the controller's write gates): a fenced thread's writes are refused unsent,
reads still work."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.client import Config, WriteFenced, fenced
from cloudcoil_sync.client._internal.gate import current
from cloudcoil_sync.client._internal.retry import RetryPolicy
from cloudcoil_sync.controller._internal.fence import WriteFence
from cloudcoil_sync.testing import Emulator
from cloudcoil_sync.testing._internal.api import LogEntry


def test_a_closed_fence_refuses_writes_but_not_reads(
    kube_emulator: Emulator, kube_config: Config
) -> None:
    api = kube_config.client(ConfigMap).raw
    guard = WriteFence(reason="test over")
    with fenced(guard):
        assert current() is guard
        api.create({"metadata": {"name": "before"}})
        guard.close()
        assert api.get("before")["metadata"]["name"] == "before"
        with pytest.raises(WriteFenced, match="test over"):
            api.create({"metadata": {"name": "after"}})
    assert current() is None
    api.create({"metadata": {"name": "unfenced"}})  # other work is not affected
    names = {o["metadata"]["name"] for o in kube_emulator.list_objects("", "configmaps", "default")}
    assert {"before", "unfenced"} <= names and "after" not in names


def test_a_deadline_closes_the_fence_and_close_waits_for_writes_in_flight() -> None:
    assert WriteFence(time.monotonic() - 1).closed
    assert not WriteFence(time.monotonic() + 60).closed
    assert WriteFence(time.monotonic() + 0.05).wait(10)  # the deadline closes it
    assert not WriteFence().wait(0.01)
    guard = WriteFence()
    writing, finish = threading.Event(), threading.Event()

    def write() -> None:
        with guard.write("PATCH", "/x"):
            writing.set()
            finish.wait(10)

    writer = threading.Thread(target=write)
    writer.start()
    assert writing.wait(10)
    waiter = threading.Thread(target=lambda: closed.append(guard.wait(10)))
    closed: list[bool] = []
    waiter.start()
    assert guard.close(timeout=0.05) is False  # still on the wire: not cut short
    waiter.join(10)
    assert closed == [True]  # waiters learn at once that the fence closed
    finish.set()
    assert guard.close(timeout=10) is True
    writer.join(10)
    with pytest.raises(WriteFenced), guard.write("DELETE", "/x"):
        pass


def test_a_child_fence_admits_writes_only_while_its_parent_does() -> None:
    now = [100.0]
    term = WriteFence(110.0, reason="past the renew deadline", clock=lambda: now[0])
    own = WriteFence(reason="pass abandoned", parent=term)
    with own.write("PATCH", "/x"):
        assert term.in_flight == 1 and own.in_flight == 1  # counted by both
    now[0] = 110.0  # the term's deadline passed: nobody called close()
    assert own.closed and term.closed
    with pytest.raises(WriteFenced, match="past the renew deadline"), own.write("PATCH", "/x"):
        pass
    term.deadline = 120.0  # a renewal moved it forward
    assert not own.closed
    own.close()
    with pytest.raises(WriteFenced, match="pass abandoned"), own.write("PATCH", "/x"):
        pass
    assert not term.closed and term.in_flight == 0


class _Passing(RetryPolicy):
    """Retries at once, after `on_wait` (the time a Retry-After would take)."""

    def __init__(self, on_wait: Callable[[], None]) -> None:
        super().__init__(max_retries=3)
        self.on_wait = on_wait

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        self.on_wait()
        return 0.0


class LateLeader:
    """A client of its own on the emulator, a ConfigMap `name`, and a leader's fence (renew
    deadline 10 s) whose clock the test moves past the deadline (`expire`) when it chooses."""

    def __init__(self, kube: Emulator, name: str) -> None:
        self.kube, self.name = kube, name
        self.config = kube.config()
        self.api = self.config.client(ConfigMap).raw
        self.api.create({"metadata": {"name": name}})
        self.now = 0.0
        self.fence = WriteFence(10.0, reason="leadership not proven", clock=lambda: self.now)

    def expire(self) -> None:
        self.now = 11.0

    def refused_patch(self) -> list[LogEntry]:
        """A patch under the fence, refused (`WriteFenced`) and not written; the PATCH
        requests the emulator answered meanwhile."""
        before = len(self.kube.request_log)
        with fenced(self.fence), pytest.raises(WriteFenced, match="leadership not proven"):
            self.api.merge_patch(self.name, {"data": {"late": "yes"}})
        patches = [e for e in self.kube.request_log[before:] if e.method == "PATCH"]
        assert self.api.get(self.name).get("data") is None
        assert self.fence.in_flight == 0
        return patches


def test_a_retry_that_outlasts_the_fence_is_not_sent(kube_emulator: Emulator) -> None:
    """A write admitted before the renew deadline, answered 429 (Retry-After), must not be
    sent again once the deadline passed during the wait: 'no write leaves past it'."""
    late = LateLeader(kube_emulator, "late-retry")
    try:
        late.config.transport.retry = _Passing(late.expire)  # the wait ends past the deadline
        kube_emulator.faults.inject(429, method="PATCH", path="late-retry", retry_after=1)
        patches = late.refused_patch()
        assert [e.status for e in patches] == [429]  # the first attempt only
    finally:
        late.config.close()


def test_a_write_whose_fence_closes_before_its_bytes_leave_is_not_sent(
    kube_emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deadline passes after the transport's check but before the request reaches the
    socket (a process stopped there, SIGSTOP, resumes later): the connection's own check
    refuses it, nothing is sent."""
    late = LateLeader(kube_emulator, "late-send")
    try:
        transport = late.config.transport
        headers = transport._headers

        def stopped_here(*args: object) -> dict[str, str]:
            late.expire()  # past the deadline, between the check and the socket
            return headers(*args)  # type: ignore[arg-type]

        monkeypatch.setattr(transport, "_headers", stopped_here)
        patches = late.refused_patch()
        monkeypatch.undo()
        assert patches == []
        late.api.merge_patch("late-send", {"data": {"after": "yes"}})  # the pool still serves
        assert late.api.get("late-send")["data"] == {"after": "yes"}
    finally:
        late.config.close()


def test_close_from_another_thread_waits_for_the_write_in_flight_and_wakes_waiters() -> None:
    guard = WriteFence()  # nothing waited on it before the close
    writing, finish = threading.Event(), threading.Event()
    order: list[str] = []
    closed: list[bool] = []

    def write() -> None:
        with guard.write("PATCH", "/x"):
            writing.set()
            finish.wait(10)
            order.append("written")

    def close() -> None:
        closed.append(guard.close(timeout=3600))  # a lost wake-up would hang here
        order.append("closed")

    writer = threading.Thread(target=write)
    writer.start()
    assert writing.wait(10)
    closer = threading.Thread(target=close, daemon=True)
    closer.start()
    assert guard.wait(10)  # woken by the close (or closed already)
    assert order == []  # the close still waits for the write on the wire
    finish.set()
    closer.join(10)
    writer.join(10)
    assert not closer.is_alive()  # woken when the write left, not at its timeout
    assert order == ["written", "closed"] and closed == [True]
    assert guard.in_flight == 0
