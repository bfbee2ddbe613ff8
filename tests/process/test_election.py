"""Two replicas of one operator against one emulator: one leads, the standby idles, handoff."""

from __future__ import annotations

from cloudcoil_sync.application import Application
from cloudcoil_sync.testing import Emulator

from .apps import settings_app
from .conftest import Calls, StartApp, configmap, fast_election, lease, managed, released_lease


def test_only_the_leader_reconciles_and_stopping_it_hands_over(
    kube_emulator: Emulator, running: StartApp
) -> None:
    released_lease(kube_emulator.config())
    calls: dict[str, Calls] = {"a": Calls(), "b": Calls()}
    apps: dict[str, Application] = {}
    for replica in ("a", "b"):
        apps[replica] = settings_app(
            config=kube_emulator.config(),
            calls=calls[replica],
            leader_election=fast_election(identity=f"replica-{replica}"),
        )
    runs = {replica: running(app) for replica, app in apps.items()}

    assert kube_emulator.wait_for(lambda: any(app.ready for app in apps.values()), timeout=15)
    leader = next(replica for replica, app in apps.items() if app.ready)
    standby = "b" if leader == "a" else "a"
    assert lease(kube_emulator)["spec"]["holderIdentity"] == f"replica-{leader}"
    # The standby is healthy (its probes pass) but runs no informers and is not ready.
    assert apps[standby].healthy and not apps[standby].ready
    assert apps[standby].manager.informer_count == 0
    assert not apps[standby].manager.ready
    gauge = 'leader_election_master_status{name="settings"}'
    assert f"{gauge} 1.0" in apps[leader].manager.metrics()
    assert f"{gauge} 0.0" in apps[standby].manager.metrics()

    kube_emulator.create_object(configmap("first"))
    assert kube_emulator.wait_for(lambda: managed(kube_emulator, "first"), timeout=15)
    assert ("reconcile", "first") in calls[leader].log
    assert calls[standby].log == []
    assert apps[standby].manager.informer_count == 0

    # A clean stop releases the Lease: the standby takes over well within lease_duration.
    assert runs[leader].close() is None
    # Read at once: a Lease left to expire would still name the old leader for 6 s.
    assert lease(kube_emulator)["spec"].get("holderIdentity") != f"replica-{leader}"
    assert kube_emulator.wait_for(lambda: apps[standby].ready, timeout=15)
    assert lease(kube_emulator)["spec"]["holderIdentity"] == f"replica-{standby}"
    assert apps[standby].manager.informer_count == 1

    kube_emulator.create_object(configmap("second"))
    assert kube_emulator.wait_for(lambda: managed(kube_emulator, "second"), timeout=15)
    assert ("reconcile", "second") in calls[standby].log
    assert ("reconcile", "second") not in calls[leader].log

    assert runs[standby].close() is None
    assert lease(kube_emulator)["spec"]["holderIdentity"] == ""
