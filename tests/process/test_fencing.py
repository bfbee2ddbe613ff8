"""One writer at a time, between real processes (issue 17): separate replicas with their own
tokens against the emulator, whose request log records who wrote what and when.

- SIGTERM with a deep queue: no pass starts after the signal, every write of the old leader
  precedes the new leader's first write, exit 0.
- SIGSTOP past the lease, then SIGCONT: the old leader starts no pass and sends no write at
  all once resumed (its fence closed at the renew deadline, while it was stopped)."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

from cloudcoil_sync.client import Config
from cloudcoil_sync.testing import Emulator

from .conftest import configmap, lease, released_lease, wait_until
from .replicas import Replica, start_replica, writes


def holder(kube: Emulator) -> str:
    return str(lease(kube).get("spec", {}).get("holderIdentity") or "")


def deep_queue(kube: Emulator, config: Config, count: int = 200) -> None:
    released_lease(config)
    for index in range(count):
        kube.create_object(configmap(f"cm-{index:03d}"))


def leading_then_standby(kube: Emulator, old: Replica, start_new: Callable[[], Replica]) -> Replica:
    """Once `old` leads and has started passes, start the standby and wait for it to run."""
    assert wait_until(
        lambda: len(old.stamps("start")) >= 8 or old.process.poll() is not None, 60
    ), old.output()
    assert old.process.poll() is None, old.output()
    assert holder(kube) == "old"
    new = start_new()
    assert wait_until(lambda: "Operator settings started" in new.output(), 60), new.output()
    return new


def test_sigterm_with_a_deep_queue_starts_nothing_and_hands_over_without_overlap(
    kube_emulator: Emulator, kube_config: Config, tmp_path: Path
) -> None:
    kube = kube_emulator
    deep_queue(kube, kube_config)
    old = start_replica(kube, tmp_path / "old", "old")
    standby: list[Replica] = []
    try:
        standby.append(
            leading_then_standby(kube, old, lambda: start_replica(kube, tmp_path / "new", "new"))
        )
        new = standby[0]
        old.signal(signal.SIGTERM)
        assert old.process.wait(60) == 0, old.output()
        assert wait_until(lambda: writes(kube.request_log, new.user), 30), new.output()
    finally:
        for replica in (old, *standby):
            replica.close()
    output = old.output()
    assert "Released Lease settings" in output
    [stopped] = old.stamps("stop")
    starts = old.stamps("start")
    assert starts and max(starts) < stopped, "a pass started after SIGTERM"
    log = kube.request_log
    old_writes, new_writes = writes(log, old.user), writes(log, new.user)
    assert old_writes, "the old leader wrote nothing: the test proves nothing"
    assert max(e.at for e in old_writes) < min(e.at for e in new_writes)
    # Every write of the old leader, Events and the Lease release included, came first.
    assert max(e.at for e in writes(log, old.user, lease=True)) < min(e.at for e in new_writes)


def test_a_leader_paused_past_its_lease_sends_no_write_after_it_resumes(
    kube_emulator: Emulator, kube_config: Config, tmp_path: Path
) -> None:
    kube = kube_emulator
    deep_queue(kube, kube_config)
    timing = {"lease_duration": 3, "renew_deadline": 2}
    old = start_replica(kube, tmp_path / "old", "old", **timing)
    standby: list[Replica] = []
    try:
        standby.append(
            leading_then_standby(
                kube, old, lambda: start_replica(kube, tmp_path / "new", "new", **timing)
            )
        )
        new = standby[0]
        old.signal(signal.SIGSTOP)
        # kill() returns before the signal stops a thread running on the other core.
        assert wait_until(old.stopped, 10)
        paused = time.monotonic()
        # The standby takes over after the lease duration and writes.
        assert wait_until(
            lambda: holder(kube) == "new" and bool(writes(kube.request_log, new.user)), 60
        ), new.output()
        resumed = time.monotonic()
        old.signal(signal.SIGCONT)
        code = old.process.wait(60)
    finally:
        for replica in (old, *standby):
            replica.close()
    output = old.output()
    assert code == 1, output  # leadership lost: non-zero so that the Pod restarts
    assert "Lost leadership of Lease settings" in output
    assert not [at for at in old.stamps("start") if at > paused], "a pass started after SIGCONT"
    log = kube.request_log
    # The log stamps a request when its answer leaves: one sent just before the stop may be
    # answered after it. Once resumed, nothing of the old leader may reach the API.
    late = [e for e in writes(log, old.user) + writes(log, old.user, lease=True) if e.at > resumed]
    assert late == [], [(e.method, e.path, e.status) for e in late]
    assert writes(log, old.user), "the old leader wrote nothing: the test proves nothing"
    first_new = min(e.at for e in writes(log, new.user))
    assert max(e.at for e in writes(log, old.user)) < first_new < resumed
