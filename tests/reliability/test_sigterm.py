"""Scenario 9: SIGTERM to an operator process mid-convergence: the pass in flight finishes
and is persisted, the Lease is released, exit status 0, within the terminationGracePeriodSeconds
its manifests generate. (tests/process covers SIGTERM to an idle operator; this one stops it
while hundreds of keys are still queued, and while a write outlives the drain.)"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import IO

import yaml

from cloudcoil_sync.client import Config
from cloudcoil_sync.testing import Emulator

from .conftest import LABEL, configmap, managed, wait_until

REPO = Path(__file__).resolve().parents[2]
LEASES = ("coordination.k8s.io", "v1", "leases")

APP = textwrap.dedent(
    f"""
    import logging
    import os
    import threading

    from cloudcoil.models.kubernetes.core.v1 import ConfigMap
    from cloudcoil_sync.application import Application
    from cloudcoil_sync.controller import LeaderElection

    election = LeaderElection("sigterm", lease_duration=6, renew_deadline=5, retry_period=0.1)
    app = Application("sigterm", leader_election=election)
    configs = app.controller(
        ConfigMap, label_selector="{LABEL}=true", workers=2, shutdown_timeout=15
    )
    signalled = threading.Event()


    class Signalled(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage().startswith("Received SIGTERM"):
                signalled.set()


    logging.getLogger("cloudcoil_sync").addHandler(Signalled())

    @configs.reconcile()
    def reconcile(cm: ConfigMap) -> ConfigMap:
        data = dict(cm.data or {{}})
        if data.get("slow") and "echo" not in data:
            # Announce the pass is in flight; it ends only once SIGTERM was received, so the
            # drain must wait for it (then a little work after the signal).
            with open(os.environ["IN_FLIGHT"], "w") as marker:
                marker.write(cm.name)
            assert signalled.wait(30), "no SIGTERM"
        data["echo"] = data.get("value", "")
        cm.data = data
        return cm

    if __name__ == "__main__":
        app.main()
    """
)


def write_kubeconfig(kube: Emulator, path: Path) -> Path:
    cluster = {
        "server": kube.url,
        "certificate-authority-data": base64.b64encode(kube.ca_pem).decode(),
    }
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "emulator", "cluster": cluster}],
        "users": [{"name": "admin", "user": {"token": kube.admin_token}}],
        "contexts": [
            {
                "name": "emulator",
                "context": {"cluster": "emulator", "user": "admin", "namespace": "default"},
            }
        ],
        "current-context": "emulator",
    }
    path.write_text(yaml.safe_dump(document))
    return path


def generated_grace(folder: Path, env: dict[str, str]) -> int:
    """The terminationGracePeriodSeconds ``app.py manifests`` generates for this operator."""
    done = subprocess.run(
        [sys.executable, str(folder / "app.py"), "manifests", "--image", "example/sigterm:v1"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    (deployment,) = [d for d in yaml.safe_load_all(done.stdout) if d["kind"] == "Deployment"]
    return int(deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"])


def test_sigterm_mid_convergence_finishes_the_pass_in_flight_and_exits_zero(
    kube_emulator: Emulator, kube_config: Config, tmp_path: Path
) -> None:
    kube = kube_emulator
    (tmp_path / "app.py").write_text(APP)
    kube_config.client(LEASES).create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "sigterm"},
            "spec": {"holderIdentity": "", "leaseDurationSeconds": 1, "leaseTransitions": 0},
        }
    )
    kube.create_object(configmap("a-slow", "s", slow="1"))
    for i in range(300):
        kube.create_object(configmap(f"cm-{i:03d}", f"v{i}"))
    in_flight = tmp_path / "in-flight"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "CLOUDCOIL_"))}
    env["KUBECONFIG"] = str(write_kubeconfig(kube, tmp_path / "kubeconfig"))
    env["PYTHONPATH"] = str(REPO)
    env["IN_FLIGHT"] = str(in_flight)
    grace = generated_grace(tmp_path, env)
    assert grace == 15 + 30 + 10 + 10 + 9 + 5  # ceil(... + 3 * 2.5 + 1 + ...)
    stderr = (tmp_path / "stderr").open("w+")
    process = subprocess.Popen(
        [sys.executable, str(tmp_path / "app.py"), "run", "--log-format", "json"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )
    try:
        started = wait_until(lambda: in_flight.exists() or process.poll() is not None, 60, 0.02)
        assert started and process.poll() is None, output(stderr)
        process.send_signal(signal.SIGTERM)
        at_signal = sum("echo" in (o.get("data") or {}) for o in managed(kube).values())
        # within the Deployment's grace period: the kubelet would not have killed it
        assert process.wait(timeout=grace) == 0, output(stderr)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    objects = managed(kube)
    # The pass in flight when SIGTERM came finished and was written.
    assert objects["a-slow"]["data"] == {"value": "s", "slow": "1", "echo": "s"}
    # Every other object is either untouched or fully reconciled: nothing half-written.
    done = 0
    for name, obj in objects.items():
        value = obj["data"]["value"]
        if name != "a-slow":
            assert obj["data"] in ({"value": value}, {"value": value, "echo": value}), name
            done += "echo" in obj["data"]
    assert at_signal < 300 <= done + 300  # SIGTERM came mid-convergence
    print(f"{at_signal} of 300 reconciled at SIGTERM, {done} at exit")
    lease = kube.get_object("coordination.k8s.io", "leases", "default", "sigterm") or {}
    assert lease["spec"]["holderIdentity"] == ""  # released on the way out
    messages = [json.loads(line)["message"] for line in output(stderr).splitlines() if line.strip()]
    assert any(message.startswith("Received SIGTERM") for message in messages)
    assert "Released Lease sigterm" in messages


WRITER = textwrap.dedent(
    """
    import os

    from cloudcoil.models.kubernetes.core.v1 import ConfigMap
    from cloudcoil_sync.application import Application
    from cloudcoil_sync.controller import LeaderElection

    election = LeaderElection("sigterm", lease_duration=6, renew_deadline=5, retry_period=0.1)
    app = Application("sigterm", leader_election=election)
    configs = app.controller(ConfigMap, label_selector="LABEL=true", shutdown_timeout=1)

    @configs.reconcile()
    def reconcile(cm: ConfigMap) -> ConfigMap:
        cm.data = {**(cm.data or {}), "echo": "written"}
        with open(os.environ["IN_FLIGHT"], "w") as marker:
            marker.write(cm.name)  # the pass's write goes out next
        return cm

    if __name__ == "__main__":
        app.main()
    """
).replace("LABEL", LABEL)


def test_a_write_outliving_the_drain_lands_and_the_lease_is_released_within_the_grace(
    kube_emulator: Emulator, kube_config: Config, tmp_path: Path
) -> None:
    """The pass's PATCH takes 4 s, the drain allows 1 s: the write fence waits for the write
    on the wire, then the Lease is released, all before the generated grace period ends."""
    kube = kube_emulator
    (tmp_path / "app.py").write_text(WRITER)
    kube_config.client(LEASES).create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "sigterm"},
            "spec": {"holderIdentity": "", "leaseDurationSeconds": 1, "leaseTransitions": 0},
        }
    )
    in_flight = tmp_path / "in-flight"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "CLOUDCOIL_"))}
    env["KUBECONFIG"] = str(write_kubeconfig(kube, tmp_path / "kubeconfig"))
    env["PYTHONPATH"] = str(REPO)
    env["IN_FLIGHT"] = str(in_flight)
    grace = generated_grace(tmp_path, env)
    assert grace == 1 + 30 + 10 + 10 + 9 + 5
    kube.faults.add_latency(4.0, method="PATCH", path="/configmaps/slow-write$")
    kube.create_object(configmap("slow-write", "v"))
    stderr = (tmp_path / "stderr").open("w+")
    process = subprocess.Popen(
        [sys.executable, str(tmp_path / "app.py"), "run", "--log-format", "json"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )
    try:
        started = wait_until(lambda: in_flight.exists() or process.poll() is not None, 60, 0.02)
        assert started and process.poll() is None, output(stderr)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=grace) == 0, output(stderr)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert managed(kube)["slow-write"]["data"] == {"value": "v", "echo": "written"}
    lease = kube.get_object("coordination.k8s.io", "leases", "default", "sigterm") or {}
    assert lease["spec"]["holderIdentity"] == "", output(stderr)  # released, not left to expire


def output(stream: IO[str]) -> str:
    stream.seek(0)
    return stream.read()
