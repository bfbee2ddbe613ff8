"""A real operator process: SIGTERM drains the pass in flight, releases the Lease, exits 0,
and a standby replica takes over at once instead of waiting out the lease duration."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from cloudcoil_sync.client import Config
from cloudcoil_sync.testing import Emulator

from .apps import settings_app
from .conftest import (
    StartApp,
    configmap,
    fast_election,
    lease,
    managed,
    released_lease,
    write_kubeconfig,
)

REPO = Path(__file__).resolve().parents[2]

# The SPEC's example, whose pass for "slow" announces itself (a ConfigMap) and then blocks
# until the test sends SIGUSR1.
APP = textwrap.dedent(
    """
    import signal
    import threading

    from cloudcoil.models.kubernetes.core.v1 import ConfigMap
    from cloudcoil_sync.application import Application
    from cloudcoil_sync.controller import Context

    # The test lets the slow pass end with SIGUSR1 (the operator handles only INT and TERM).
    RELEASED = threading.Event()
    signal.signal(signal.SIGUSR1, lambda signum, frame: RELEASED.set())
    app = Application("settings", leader_election=True)
    configs = app.controller(ConfigMap, label_selector="example.com/manage=true")

    @configs.reconcile()
    def reconcile(config: ConfigMap, ctx: Context) -> ConfigMap:
        if config.name == "slow":
            ctx.client(ConfigMap).create(ConfigMap(metadata={"name": "slow-entered"}))
            RELEASED.wait(60)
        config.data = {**(config.data or {}), "managed-by": "cloudcoil"}
        return config

    if __name__ == "__main__":
        app.main()
    """
)


def test_sigterm_drains_releases_and_a_standby_takes_over(
    kube_emulator: Emulator, kube_config: Config, tmp_path: Path, running: StartApp
) -> None:
    (tmp_path / "app.py").write_text(APP)
    released_lease(kube_config)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "CLOUDCOIL_"))}
    env.update(
        KUBECONFIG=str(write_kubeconfig(kube_emulator, tmp_path / "kubeconfig")),
        PYTHONPATH=str(REPO),
    )
    log_path = tmp_path / "stderr"
    with log_path.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, str(tmp_path / "app.py"), "run"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        hostname = os.uname().nodename

        def holder() -> str:
            return str(lease(kube_emulator).get("spec", {}).get("holderIdentity"))

        assert kube_emulator.wait_for(
            lambda: holder().startswith(hostname) or process.poll() is not None, timeout=60
        )
        assert process.poll() is None, log_path.read_text()
        leader = holder()

        # A second replica (in this process) waits as a standby.
        standby = settings_app(
            config=kube_emulator.config(), leader_election=fast_election(identity="standby")
        )
        standby_run = running(standby)

        kube_emulator.create_object(configmap("slow"))
        assert kube_emulator.wait_for(
            lambda: (
                kube_emulator.get_object("", "configmaps", "default", "slow-entered") is not None
            ),
            timeout=30,
        )
        process.send_signal(signal.SIGTERM)
        assert kube_emulator.wait_for(
            lambda: "Received SIGTERM" in log_path.read_text(), timeout=30
        ), log_path.read_text()
        # Draining: the pass is still in flight and the Lease still held by the old leader.
        assert process.poll() is None
        assert holder() == leader and not standby.ready
        assert not managed(kube_emulator, "slow")

        process.send_signal(signal.SIGUSR1)  # the slow pass ends
        assert process.wait(timeout=60) == 0, log_path.read_text()
        released = holder() != leader  # read at once: an expiring Lease would still name it
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    output = log_path.read_text()
    assert managed(kube_emulator, "slow"), output
    assert "Released Lease settings" in output
    # Released, not expired: the old leader's name left the Lease as it exited.
    assert released
    assert kube_emulator.wait_for(lambda: standby.ready, timeout=10)
    assert holder() == "standby"
    kube_emulator.create_object(configmap("after-handover"))
    assert kube_emulator.wait_for(lambda: managed(kube_emulator, "after-handover"), timeout=15)
    assert standby_run.close() is None
