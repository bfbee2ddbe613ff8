"""100 forced handoffs of a whole operator, with faults, and zero overlapping writes.

Each replica is an Application with its own token (the emulator's request log tells their
writes apart). Its controllers write directly; its elector talks to the API through a
FaultProxy, so a partition cuts the Lease only: the controllers could still write, and only
the Lease-deadline fence stops them. Of every five handoffs four are graceful stops
(release) and one a fault, in turn: a partition of the leader's Lease traffic (loss at the
renew deadline; the standby waits the lease out), a Lease-write 503 storm, connections
reset. Every term writes (each leader stamps every object with its name), and the writes of
two replicas never interleave."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from leader.proxy import FaultProxy
from waiting import wait_until

from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Controller, LeaderElection, LeadershipLost, Manager
from cloudcoil_sync.testing import Emulator

from .conftest import LABEL, configmap

LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/default/leases/handoff"
FAULTS = ("partition", "5xx", "reset")
ROUNDS = 100


class Replica:
    def __init__(self, kube: Emulator, index: int, stack: ExitStack) -> None:
        self.identity = f"replica-{index}"
        token = f"handoff-token-{index}"
        kube.add_token(token, self.identity, ("system:masters",))
        self.proxy = stack.enter_context(FaultProxy("127.0.0.1", kube.port))
        direct = Config(server=kube.url, token=token, ca_data=kube.ca_pem, namespace="default")
        lease = Config(
            server=f"https://127.0.0.1:{self.proxy.port}",
            token=token,
            ca_data=kube.ca_pem,
            namespace="default",
        )
        stack.callback(direct.close)
        stack.callback(lease.close)
        election = LeaderElection(
            "handoff",
            identity=self.identity,
            config=lease,
            lease_duration=1,
            renew_deadline=0.6,
            retry_period=0.1,
        )
        controller: Controller[ConfigMap] = Controller(
            ConfigMap, label_selector=f"{LABEL}=true", workers=2
        )
        name = self.identity

        @controller.reconcile()
        def reconcile(cm: ConfigMap) -> ConfigMap:
            cm.data = {**(cm.data or {}), "writer": name}
            return cm

        # A Manager: an Application insists on one Config for its election and controllers.
        self.manager = Manager(controller, config=direct, leader_election=election)
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=f"handoff-{index}")
        self.thread.start()

    def _run(self) -> None:
        try:
            self.manager.run(self.stop)
        except BaseException as error:
            self.error = error

    def close(self, timeout: float = 30) -> BaseException | None:
        self.stop.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"{self.identity} did not stop"
        return self.error


def writers(kube: Emulator) -> Iterator[str]:
    """The user of every object write (not Lease traffic), in the order the API answered."""
    for entry in kube.request_log:
        written = "/configmaps/" in entry.path or "/events" in entry.path
        if written and entry.method not in ("GET", "HEAD"):
            yield entry.user


def wrote(kube: Emulator, replica: Replica) -> bool:
    return holder(kube) == replica.identity and replica.identity in set(writers(kube))


def take_over(kube: Emulator, standby: Replica, spare: Callable[[], Replica]) -> Replica | None:
    """The replica that took the Lease and wrote, or None after 30 s. On a starved machine a
    standby can lose its fresh lead at the 0.6 s renew deadline before writing (its run ends
    with LeadershipLost, the Lease released): that is a loss, not an overlap, so a spare
    replica (at most seven) is started to take over instead."""
    for _ in range(8):
        ended = wait_until(
            lambda: wrote(kube, standby) or not standby.thread.is_alive(),  # noqa: B023
            timeout=30,
        )
        if ended and wrote(kube, standby):
            return standby
        if standby.thread.is_alive():
            raise AssertionError(f"{standby.identity} alive, not written; holder {holder(kube)!r}")
        error = standby.close()
        assert isinstance(error, LeadershipLost), repr(error)
        standby = spare()
    return None


def holder(kube: Emulator) -> str:
    lease = kube.get_object("coordination.k8s.io", "leases", "default", "handoff") or {}
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


@pytest.mark.slow
def test_forced_handoffs_with_faults_never_overlap_writes(kube_emulator: Emulator) -> None:
    kube = kube_emulator
    for index in range(4):
        kube.create_object(configmap(f"cm-{index}", "v"))
    counter = itertools.count()
    kinds: dict[str, int] = {}
    with ExitStack() as stack:

        def spare() -> Replica:
            return Replica(kube, next(counter), stack)

        first = take_over(kube, spare(), spare)
        assert first is not None, "no first leader wrote"
        leader = first
        for round_ in range(ROUNDS):
            standby = spare()
            # Four graceful handoffs, then a fault (a fault costs a lease duration).
            kind = "stop" if round_ % 5 != 4 else FAULTS[round_ // 5 % len(FAULTS)]
            kinds[kind] = kinds.get(kind, 0) + 1
            if kind == "stop":
                leader.stop.set()
            elif kind == "partition":
                leader.proxy.set_mode("blackhole")
            elif kind == "5xx":
                kube.faults.inject(503, count=8, method="PUT", path=LEASE_PATH)
            else:
                leader.proxy.set_mode("reset")
            took = take_over(kube, standby, spare)
            assert took is not None, f"round {round_}: {kind}"
            standby = took
            leader.proxy.set_mode("pass")
            error = leader.close()
            # A graceful stop normally ends without error; on a loaded machine the 0.6 s renew
            # deadline can pass first, which is a loss, not an overlap: only writes are judged.
            assert error is None or isinstance(error, LeadershipLost), repr(error)
            leader = standby
        assert leader.close() is None
    order = [user for user in writers(kube)]
    runs = [user for user, _ in itertools.groupby(order)]
    assert len(runs) == len(set(runs)), f"writes of two replicas interleaved: {runs}"
    assert len(runs) >= ROUNDS + 1  # every term wrote (and a spare's, if a lead starved)
    assert kinds == {"stop": 80, "partition": 7, "5xx": 7, "reset": 6}
