"""Process and leader lifespans: resources that live as long as the process or the leadership.

``@app.lifespan()`` runs on every replica around the whole run (webhook server and manager):
here it opens an HTTP session pool the handlers share. ``@app.lifespan(scope="leader")`` runs
only on the elected leader, after the Lease is acquired and before the controllers start, and
ends after they stop and before the Lease is released: here a background job that must never
run twice at once. Each is a generator that yields exactly once; the optional
``LifecycleEvent`` says why cleanup runs (``event.type``: SHUTDOWN, LEADERSHIP_LOST, FAILURE).

    python examples/patterns/lifespans.py manifests
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import requests
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.application import Application, LifecycleEvent
from cloudcoil_sync.controller import Context

__all__ = ["STATE", "State", "app", "greetings"]

log = logging.getLogger("examples.lifespans")


@dataclass
class State:
    """What the lifespans hand to the handlers (one operator per process)."""

    session: requests.Session | None = None
    leader: str | None = None
    ticks: int = 0
    history: list[str] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def record(self, entry: str) -> None:
        with self.changed:
            self.history.append(entry)
            self.changed.notify_all()


STATE = State()

app = Application("lifespans", leader_election=True)
greetings = app.controller(ConfigMap, label_selector="example.com/greet=true")


@app.lifespan()
def http_pool(event: LifecycleEvent) -> Iterator[None]:
    STATE.session = requests.Session()
    STATE.record(f"process:{event.type}")
    try:
        yield
    finally:
        STATE.record(f"process:{event.type}")  # shutdown, or failure with event.error
        STATE.session.close()
        STATE.session = None


@app.lifespan(scope="leader")
def leader_job(event: LifecycleEvent) -> Iterator[None]:
    STATE.leader = event.identity
    STATE.record(f"leader:{event.type}")
    stop = threading.Event()

    def tick() -> None:  # e.g. a periodic report only one replica may send
        while not stop.wait(0.2):
            with STATE.changed:
                STATE.ticks += 1
                STATE.changed.notify_all()

    job = threading.Thread(target=tick, name="leader-job")
    job.start()
    try:
        yield
    finally:
        stop.set()
        job.join(5)
        STATE.record(f"leader:{event.type}")
        STATE.leader = None


@greetings.reconcile()
def greet(config: ConfigMap, ctx: Context[ConfigMap]) -> ConfigMap | None:
    if (config.data or {}).get("leader") == STATE.leader:
        return None
    config.data = {**(config.data or {}), "leader": STATE.leader or ""}
    ctx.event("Greeted", f"reconciled by {STATE.leader}")
    return config


if __name__ == "__main__":
    app.main()
