"""Replicas that elect over one Lease and record when their leader work runs.

Each replica loops like a restarting pod: build a LeaderElection, ``run`` the leader work,
and on LeadershipLost (or a forced restart) start over with a fresh elector. The recorder
checks, as the work starts and ends, that no two replicas' work ever overlaps.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

from cloudcoil_sync.controller._internal.leader import LeaderElection, LeadershipLost


@dataclass
class Interval:
    replica: int
    identity: str
    start: float  # monotonic: leader work began
    end: float = float("inf")  # monotonic: leader work returned
    deadline_at_end: float | None = None  # the elector's renew deadline when work returned
    stop_signalled: float | None = None  # when the work's stop event was observed set
    lost_at: float | None = None  # when the elector declared the loss


@dataclass
class Recorder:
    cond: threading.Condition = field(default_factory=threading.Condition)
    intervals: list[Interval] = field(default_factory=list)
    active: list[Interval] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)

    def enter(self, replica: int, elector: LeaderElection) -> Interval:
        with self.cond:
            now = time.monotonic()
            if self.active:
                self.violations.append(
                    f"replica {replica} ({elector!r}) started at {now:.3f} while {self.active} ran"
                )
            if not elector.leading.is_set():
                self.violations.append(f"replica {replica} started work as a standby")
            interval = Interval(replica, elector.identity, now)
            self.intervals.append(interval)
            self.active.append(interval)
            self.cond.notify_all()
            return interval

    def exit(self, interval: Interval) -> None:
        with self.cond:
            interval.end = time.monotonic()
            self.active.remove(interval)
            self.cond.notify_all()

    def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(predicate, timeout)

    def wait_new_leader(self, started: int, timeout: float) -> bool:
        """Wait until more than ``started`` leadership terms began."""
        with self.cond:
            return self.cond.wait_for(lambda: len(self.intervals) > started, timeout)

    def leaders_started(self) -> int:
        with self.cond:
            return len(self.intervals)

    def current(self) -> Interval | None:
        with self.cond:
            return self.active[0] if self.active else None

    def assert_never_overlapped(self) -> None:
        assert not self.violations, self.violations
        ordered = sorted(self.intervals, key=lambda interval: interval.start)
        for before, after in itertools.pairwise(ordered):
            assert before.end <= after.start, (before, after)


def describe(replicas: list[Replica]) -> str:
    """Diagnostics for a failed wait: each replica's elector state."""
    lines = [f"now {time.monotonic():.3f}"]
    for replica in replicas:
        elector = replica.elector
        if elector is not None:
            lines.append(
                f"replica {replica.index}: {elector!r} losses {replica.losses} "
                f"errors {replica.errors}"
            )
    lines.extend(replica.recorder.violations[:3] if replicas else [])
    lines.append(stacks())
    return "\n".join(lines)


def stacks() -> str:
    lines = []
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    for ident, frame in sys._current_frames().items():
        lines.append(f"--- {names.get(ident, ident)}")
        lines.extend(line.rstrip() for line in traceback.format_stack(frame)[-4:])
    return "\n".join(lines)


class Replica:
    """One candidate process: elects, runs leader work, restarts after loss or on demand."""

    def __init__(
        self,
        index: int,
        recorder: Recorder,
        make_elector: Callable[[int], LeaderElection],
    ) -> None:
        self.index = index
        self.recorder = recorder
        self.make_elector = make_elector
        self.losses = 0
        self.errors: list[BaseException] = []
        self.elector: LeaderElection | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._shutdown = False
        self._thread = threading.Thread(target=self._loop, name=f"replica-{index}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def live(self) -> LeaderElection | None:
        """The elector of the run going on, None while a run stops (or before the first).

        A restarted replica builds its next elector only once the stopping run returned, so
        what "this replica has seen" means that next elector's, not the stopping one's.
        """
        with self._lock:
            return None if self._stop.is_set() else self.elector

    def restart(self) -> None:
        """Stop gracefully (the leader releases the Lease) and come back as a new candidate."""
        with self._lock:
            self._stop.set()

    def shutdown(self, timeout: float = 10) -> None:
        with self._lock:
            self._shutdown = True
            self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"replica {self.index} did not stop"

    def _loop(self) -> None:
        while True:
            with self._lock:
                if self._shutdown:
                    return
                self._stop = threading.Event()
                stop = self._stop
                elector = self.elector = self.make_elector(self.index)
            try:
                elector.run(self._work(elector), stop=stop)
            except LeadershipLost:
                self.losses += 1
            except BaseException as error:
                self.errors.append(error)
                return
            finally:
                stop.set()  # this term's stop event is done with (ends its relay thread)
                self._check_work_ended(elector)
                close = getattr(elector.config, "close", None)
                if close is not None:
                    close()

    def _check_work_ended(self, elector: LeaderElection) -> None:
        with self.recorder.cond:
            running = [i for i in self.recorder.active if i.identity == elector.identity]
            if running:
                self.recorder.violations.append(
                    f"run() of {elector.identity} returned while its work ran: {running}\n"
                    + stacks()
                )

    def _work(self, elector: LeaderElection) -> Callable[[threading.Event], None]:
        def work(stop: threading.Event) -> None:
            interval = self.recorder.enter(self.index, elector)
            try:
                while not stop.wait(1.0):
                    pass
                interval.stop_signalled = time.monotonic()
            finally:
                interval.deadline_at_end = elector.fence.deadline  # the last renewal's
                interval.lost_at = elector.lost_at
                self.recorder.exit(interval)

        return work
