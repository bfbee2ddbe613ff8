"""Idle cost and stop latency of `LeaderElection.run(work, stop=event)`.

    python bench/leader_idle.py [--leaders 10] [--standbys 10] [--seconds 20] [--json out.json]

Runs ``--leaders`` elections on Leases of their own (each leads) and ``--standbys`` more on
one Lease a further leader holds, all through ``run(work, stop=event)`` against the in-process
emulator at client-go's timings (15 s lease, 10 s renew deadline, 2 s retry). Once every one
leads or stands by it measures the process's CPU seconds and context switches over
``--seconds`` of idling (renewals, the standbys' Lease watches, and whatever the supervisors
do while they wait), then sets every stop event and reports how long each ``run`` took to
return. Before the supervisors waited on notifications they re-checked the stop event every
50 ms; run this against both trees to compare (``PYTHONPATH=<tree>``).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import threading
import time
from typing import Any

from common import emit

from cloudcoil_sync.controller._internal.leader import LeaderElection
from cloudcoil_sync.testing import Emulator


class Candidate:
    """One ``run`` on its own thread; notes when it returned."""

    def __init__(self, election: LeaderElection) -> None:
        self.election = election
        self.stop = threading.Event()
        self.returned: float | None = None
        self.thread = threading.Thread(target=self._run, name=f"bench-{election.identity}")

    def _run(self) -> None:
        self.election.run(lambda work_stop: work_stop.wait(3600), stop=self.stop)
        self.returned = time.monotonic()


def switches() -> int:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_nvcsw + usage.ru_nivcsw


def measure(kube: Emulator, leaders: int, standbys: int, seconds: float) -> dict[str, Any]:
    config = kube.config()
    elections = [
        LeaderElection(f"own-{i}", identity=f"l{i}", config=config) for i in range(leaders)
    ]
    shared = [
        LeaderElection("shared", identity=f"s{i}", config=config) for i in range(standbys + 1)
    ]
    candidates = [Candidate(election) for election in elections + shared]
    candidates[leaders].thread.start()  # the shared Lease's holder first
    assert shared[0].wait_leader(30)
    for candidate in candidates:
        if not candidate.thread.is_alive():
            candidate.thread.start()
    assert all(election.wait_leader(30) for election in elections)
    assert kube.wait_for(lambda: kube.open_watches >= standbys, timeout=30)
    cpu, context, began = time.process_time(), switches(), time.monotonic()
    time.sleep(seconds)  # the idle period being measured
    idle = time.monotonic() - began
    result: dict[str, Any] = {
        "leaders": leaders + 1,
        "standbys": standbys,
        "idle_seconds": round(idle, 2),
        "cpu_seconds": round(time.process_time() - cpu, 3),
        "context_switches_per_second": round((switches() - context) / idle),
    }
    stopped = time.monotonic()
    for candidate in reversed(candidates):  # standbys and own-Lease leaders before the holder
        candidate.stop.set()
    for candidate in candidates:
        candidate.thread.join(60)
    latencies = [(c.returned or float("inf")) - stopped for c in candidates]
    result["stop_to_return_ms_median"] = round(statistics.median(latencies) * 1000, 1)
    result["stop_to_return_ms_max"] = round(max(latencies) * 1000, 1)
    config.close()
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leaders", type=int, default=10)
    parser.add_argument("--standbys", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    with Emulator() as kube:
        result = measure(kube, args.leaders, args.standbys, args.seconds)
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
