"""The threads of a running operator with leader election: a leader, a standby, a warm standby.

    python bench/operator_threads.py [--json out.json]

Three Applications (one ConfigMap controller, 4 workers, a HealthServer, leader election on
one Lease) run in this process against the in-process emulator, started one after the other;
each is counted once it leads (ready, its workers started) or stands by (its first Lease read
answered; for the warm one, its informer synced). Reported per role: the threads it added,
by name with digits folded (the emulator's connection threads and the app's own `run` thread
are left out). `--tree` is not needed: run it with ``PYTHONPATH=<checkout>`` to count another.
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from common import emit

from cloudcoil_sync.application import Application
from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import HealthServer, LeaderElection
from cloudcoil_sync.testing import Emulator

IGNORED = ("emulator-", "run-")


def operator(config: Config, identity: str, *, warm: bool) -> Application:
    election = LeaderElection(
        "threads",
        identity=identity,
        lease_duration=6,
        renew_deadline=5,
        retry_period=0.5,
        warm=warm,
    )
    app = Application(
        "threads", config=config, health=HealthServer(port=0), leader_election=election
    )
    configs = app.controller(ConfigMap, label_selector="bench=threads", workers=4)

    @configs.reconcile()
    def reconcile(config_map: ConfigMap) -> None:
        return None

    return app


def settle(predicate: Callable[[], bool], timeout: float = 30) -> None:
    give_up = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > give_up:
            raise TimeoutError("the operator did not settle")
        time.sleep(0.05)  # a measurement script: polling the public state is fine here


def counted(before: collections.Counter[str]) -> dict[str, int]:
    now = collections.Counter(t.name for t in threading.enumerate())
    added = (now - before).elements()
    shapes = collections.Counter(
        re.sub(r"\d+", "N", name) for name in added if not name.startswith(IGNORED)
    )
    return dict(sorted(shapes.items()))


def workers_alive() -> int:
    return sum(1 for t in threading.enumerate() if "-worker-" in t.name)


def measure(kube: Emulator) -> dict[str, Any]:
    result: dict[str, Any] = {}
    stops: list[tuple[threading.Event, threading.Thread]] = []
    for role, warm in (("leader", False), ("standby", False), ("warm standby", True)):
        before = collections.Counter(t.name for t in threading.enumerate())
        app = operator(kube.config(), role.replace(" ", "-"), warm=warm)
        stop = threading.Event()
        thread = threading.Thread(target=app.run, kwargs={"stop": stop}, name=f"run-{role}")
        thread.start()
        stops.append((stop, thread))
        if role == "leader":
            app.wait_ready(30)
            settle(lambda: workers_alive() >= 4)
        else:
            settle(lambda app=app: app.manager is not None)  # type: ignore[misc]
            election = app.manager.leader_election  # type: ignore[union-attr]
            assert election is not None
            settle(election.healthy)  # started: its lease thread runs
            assert election.wait_ready(30) and not election.is_leader
            if warm:
                settle(lambda app=app: app.manager.informer_count == 1)  # type: ignore[misc,union-attr]
        threads = counted(before)
        result[role] = {"threads": sum(threads.values()), "by_name": threads}
    for stop, thread in reversed(stops):
        stop.set()
        thread.join(60)
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    with Emulator() as kube:
        result = measure(kube)
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
