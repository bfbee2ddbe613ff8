"""Stop semantics (SPEC §4, issue 17): on stop no pass starts, in-flight passes finish or are
abandoned at `shutdown_timeout` with their writes refused, and only then is the Lease released."""

from __future__ import annotations

import threading
import time

from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.client import Config
from cloudcoil_sync.controller._internal.cache import InformerNotSynced
from cloudcoil_sync.testing import Emulator

from .apps import settings_app
from .conftest import StartApp, configmap, fast_election, lease, released_lease, wait_until

LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/default/leases/settings"


def workers_alive() -> list[str]:
    return [t.name for t in threading.enumerate() if "-worker-" in t.name and t.is_alive()]


def test_stop_with_a_deep_queue_starts_nothing_and_releases_after_the_last_write(
    kube_emulator: Emulator, kube_config: Config, running: StartApp
) -> None:
    released_lease(kube_config)
    for index in range(40):
        kube_emulator.create_object(configmap(f"cm-{index:02d}"))
    entered: list[tuple[float, str]] = []
    lock = threading.Lock()
    go = threading.Semaphore(0)

    def hook(config: ConfigMap) -> None:
        with lock:
            entered.append((time.monotonic(), config.name or ""))
        assert go.acquire(timeout=60)

    app = settings_app(
        config=kube_emulator.config(),
        hook=hook,
        leader_election=fast_election(identity="old"),
        controller_options={"workers": 4, "shutdown_timeout": 1},
    )
    run = running(app)
    assert wait_until(lambda: len(entered) == 4, timeout=30)
    kube_emulator.clear_log()
    stopped = time.monotonic()
    run.stop.set()
    go.release(2)  # two passes finish within shutdown_timeout; two are abandoned
    assert run.close(timeout=30) is None
    assert lease(kube_emulator)["spec"]["holderIdentity"] == ""  # released
    go.release(2)  # the abandoned passes return now, after the release: their writes are refused
    assert wait_until(lambda: not workers_alive(), timeout=30), workers_alive()

    assert len(entered) == 4 and all(at < stopped for at, _ in entered)  # nothing new started
    log = kube_emulator.request_log
    patches = [i for i, e in enumerate(log) if e.method == "PATCH" and "/configmaps/" in e.path]
    lease_puts = [i for i, e in enumerate(log) if e.method == "PUT" and e.path == LEASE_PATH]
    assert len(patches) == 2, [(e.method, e.path) for e in log]
    assert lease_puts and max(patches) < lease_puts[-1]  # every write precedes the release
    assert not [e for e in log[lease_puts[-1] :] if e.method not in ("GET",)][1:]


def test_a_warm_standby_syncs_its_cache_before_leading_and_reconciles_on_takeover(
    kube_emulator: Emulator, kube_config: Config, running: StartApp
) -> None:
    released_lease(kube_config)
    for index in range(20):
        kube_emulator.create_object(configmap(f"cm-{index:02d}"))
    leader = settings_app(config=kube_emulator.config(), leader_election=fast_election())
    leader_run = running(leader)
    leader.wait_ready(timeout=30)
    passes: list[str] = []
    standby = settings_app(
        config=kube_emulator.config(),
        hook=lambda config: passes.append(config.name or ""),
        leader_election=fast_election(identity="warm", warm=True),
    )
    standby_run = running(standby)
    # Standing by with a synced cache: no pass yet, but every object is in its informer.
    assert wait_until(lambda: standby.manager is not None and standby.manager.informer_count == 1)
    manager = standby.manager
    assert manager is not None

    def cached() -> int:
        try:
            return len(manager.cached(ConfigMap).list())
        except (InformerNotSynced, ValueError):  # ValueError: its runtime not listed yet
            return -1

    assert wait_until(lambda: cached() == 20, timeout=30)
    assert not standby.ready and passes == []
    assert leader_run.close() is None
    assert wait_until(lambda: standby.ready and len(set(passes)) == 20, timeout=30)
    assert lease(kube_emulator)["spec"]["holderIdentity"] == "warm"
    assert standby_run.close() is None


def test_a_warm_standby_that_never_leads_stops_its_informers(
    kube_emulator: Emulator, kube_config: Config, running: StartApp
) -> None:
    kube_config.client(("coordination.k8s.io", "v1", "leases")).create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "settings"},
            "spec": {"holderIdentity": "someone", "leaseDurationSeconds": 3600},
        }
    )
    before = {t.name for t in threading.enumerate()}
    standby = settings_app(
        config=kube_emulator.config(), leader_election=fast_election(identity="warm", warm=True)
    )
    run = running(standby)
    assert wait_until(lambda: kube_emulator.open_watches == 1, timeout=30)
    assert run.close() is None
    assert wait_until(lambda: kube_emulator.open_watches == 0, timeout=30)
    started = {t.name for t in threading.enumerate() if t.is_alive()} - before
    assert not [name for name in started if "informer" in name or "-worker-" in name], started


def test_a_stop_while_the_leader_syncs_its_informers_ends_the_run_at_once(
    kube_emulator: Emulator, kube_config: Config, running: StartApp
) -> None:
    """The sync wait is woken by the stop (no polling slice, no waiting out sync_timeout)."""
    released_lease(kube_config)
    kube_emulator.faults.inject(500, count=10_000, method="GET", path="/configmaps$")
    election = fast_election()
    app = settings_app(
        config=kube_emulator.config(),
        leader_election=election,
        controller_options={"sync_timeout": 600},
    )
    run = running(app)
    try:
        assert wait_until(lambda: election.is_leader, timeout=30)
        assert not app.manager.ready  # listing fails: the informers never sync
        run.stop.set()
        run.thread.join(60)  # far below sync_timeout: the stop woke the wait
        assert not run.thread.is_alive() and run.error is None
    finally:
        kube_emulator.faults.clear()
    assert lease(kube_emulator)["spec"]["holderIdentity"] == ""  # released
