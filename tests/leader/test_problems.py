"""What keeps an election from leading is said at WARNING, with what to do, rate-limited."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from waiting import wait_until

from cloudcoil_sync.application import Application
from cloudcoil_sync.client import Config, TransportError
from cloudcoil_sync.client._internal.errors import NotFound
from cloudcoil_sync.controller._internal.leader import LeaderElection
from cloudcoil_sync.controller._internal.lease_problems import LeaseProblems
from cloudcoil_sync.testing import Emulator

FAST: dict[str, Any] = {"lease_duration": 1, "renew_deadline": 0.6, "retry_period": 0.05}
LEADER_LOG = "cloudcoil_sync.controller.leader"


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def matching(self, text: str, level: int = logging.WARNING) -> list[logging.LogRecord]:
        return [r for r in list(self.records) if text in r.getMessage() and r.levelno == level]


@pytest.fixture
def records() -> Iterator[Records]:
    handler = Records()
    logger = logging.getLogger("cloudcoil_sync")
    logger.addHandler(handler)
    previous = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)


def attempts(kube: Emulator, namespace: str) -> int:
    path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    return sum(1 for e in kube.request_log if e.method == "POST" and e.path == path)


def test_a_missing_lease_namespace_is_warned_at_once_and_not_every_retry(
    kube_emulator: Emulator, kube_config: Config, records: Records
) -> None:
    election = LeaderElection("op", namespace="backups", config=kube_config, **FAST)
    election.start()
    try:
        text = "namespace 'backups' does not exist"
        assert wait_until(lambda: bool(records.matching(text)), 5)
        (warning,) = records.matching(text)
        assert "kubectl create namespace backups" in warning.getMessage()
        assert "LeaderElection(namespace=...)" in warning.getMessage()
        assert wait_until(lambda: attempts(kube_emulator, "backups") >= 10, 10)
        assert len(records.matching(text)) == 1  # rate-limited, not one per retry
        assert not records.matching("Lost the race", logging.DEBUG)  # not a lost race
        kube_config.client(("", "v1", "namespaces")).create({"metadata": {"name": "backups"}})
        assert election.wait_leader(10)
        assert records.matching("the API server answers again", logging.INFO)
    finally:
        election.stop(5)


def test_an_unreachable_server_is_a_warning_with_advice(records: Records) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    config = Config(server=f"https://127.0.0.1:{port}", token="t", namespace="default")
    election = LeaderElection("op", config=config, **FAST)
    election.start()
    try:
        assert wait_until(lambda: bool(records.matching("cannot reach the API server")), 5)
        (warning,) = records.matching("cannot reach the API server")
        assert "Lease default/op" in warning.getMessage()
        assert not records.matching("acquire attempt failed", logging.INFO)
    finally:
        election.stop(5)
        config.close()


def test_a_forbidden_lease_names_the_rbac_to_grant(
    kube_emulator: Emulator, kube_config: Config, records: Records
) -> None:
    kube_emulator.faults.inject(403, count=10, path="/leases")
    election = LeaderElection("op", config=kube_config, **FAST)
    ended = threading.Event()
    election.start(on_exit=lambda error: ended.set())
    try:
        assert ended.wait(10)
        (line,) = records.matching("RBAC denies Lease default/op", logging.ERROR)
        assert "grant get, create and update on leases" in line.getMessage()
    finally:
        election.stop(5)
        kube_emulator.faults.clear()


def test_problems_repeat_only_after_the_interval_with_a_count() -> None:
    now = [0.0]
    problems = LeaseProblems("op", "ns", interval=30, clock=lambda: now[0])
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    keep = Keep()
    logging.getLogger(LEADER_LOG).addHandler(keep)
    try:
        for step in range(20):  # every 2 s for 40 s
            now[0] = step * 2.0
            problems.report(TransportError("connection refused"))
        problems.report(NotFound(404, "NotFound", 'namespaces "ns" not found'), creating=True)
    finally:
        logging.getLogger(LEADER_LOG).removeHandler(keep)
    assert len(seen) == 3  # at 0 s, at 30 s (with the count), and the other problem at once
    assert "14 more attempts failed the same way" in seen[1]
    assert "does not exist" in seen[2]


def test_run_says_it_waits_for_leadership_before_it_is_running(
    kube_emulator: Emulator, kube_config: Config, records: Records
) -> None:
    kube_config.client(("coordination.k8s.io", "v1", "leases")).create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "waiter"},
            "spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 3600},
        }
    )
    app = Application(
        "waiter", config=kube_config, leader_election=LeaderElection("waiter", **FAST)
    )
    app.controller(ConfigMap).reconcile()(lambda config: None)
    stop = threading.Event()
    thread = threading.Thread(target=app.run, kwargs={"stop": stop})
    thread.start()
    try:
        waiting = "Operator waiter started; waiting for leadership of Lease default/waiter"
        assert wait_until(lambda: bool(records.matching(waiting, logging.INFO)), 10)
        assert not records.matching("Operator waiter is running", logging.INFO)
        leases = kube_config.client(("coordination.k8s.io", "v1", "leases"))
        held = leases.get("waiter")
        held["spec"]["holderIdentity"] = ""  # released: a standby takes it at once
        leases.replace(held)
        assert wait_until(lambda: bool(records.matching("is running", logging.INFO)), 15)
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive()
