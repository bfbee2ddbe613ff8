"""A real operator process: SIGTERM drains the pass in flight, releases the Lease, exits 0,
and a standby replica takes over at once instead of waiting out the lease duration."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
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
# until the test creates the release file.
APP = textwrap.dedent(
    """
    import os
    import pathlib
    import time

    from cloudcoil.models.kubernetes.core.v1 import ConfigMap
    from cloudcoil_sync.application import Application
    from cloudcoil_sync.controller import Context

    RELEASE = pathlib.Path(os.environ["TEST_RELEASE_FILE"])
    app = Application("settings", leader_election=True)
    configs = app.controller(ConfigMap, label_selector="example.com/manage=true")

    @configs.reconcile()
    def reconcile(config: ConfigMap, ctx: Context) -> ConfigMap:
        if config.name == "slow":
            ctx.client(ConfigMap).create(ConfigMap(metadata={"name": "slow-entered"}))
            give_up = time.monotonic() + 60
            while not RELEASE.exists() and time.monotonic() < give_up:
                time.sleep(0.01)
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
    release = tmp_path / "release"
    released_lease(kube_config)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "CLOUDCOIL_"))}
    env.update(
        KUBECONFIG=str(write_kubeconfig(kube_emulator, tmp_path / "kubeconfig")),
        PYTHONPATH=str(REPO),
        TEST_RELEASE_FILE=str(release),
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

        release.touch()
        assert process.wait(timeout=60) == 0, log_path.read_text()
        exited = time.monotonic()
    finally:
        release.touch()
        if process.poll() is None:
            process.kill()
            process.wait()
    output = log_path.read_text()
    assert managed(kube_emulator, "slow"), output
    assert "Released Lease settings" in output
    # Released, not expired: the standby leads well within the old lease's 15 s duration.
    assert kube_emulator.wait_for(lambda: standby.ready, timeout=10)
    assert time.monotonic() - exited < 10
    assert holder() == "standby"
    kube_emulator.create_object(configmap("after-handover"))
    assert kube_emulator.wait_for(lambda: managed(kube_emulator, "after-handover"), timeout=15)
    assert standby_run.close() is None
