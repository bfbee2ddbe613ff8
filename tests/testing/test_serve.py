"""``python -m cloudcoil_sync.testing serve``: a served emulator, its kubeconfig and state."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from cloudcoil.models.kubernetes.apps.v1 import Deployment
from cloudcoil.models.kubernetes.core.v1 import ConfigMap, ServiceAccount

from cloudcoil_sync.client import Config, Forbidden
from cloudcoil_sync.testing._internal.serve import cli

READY = "Admin kubeconfig:"


class Served:
    """A ``serve`` subprocess whose stderr lines are read on a thread it owns."""

    def __init__(self, folder: Path, *args: str) -> None:
        self.kubeconfig = folder / "admin.kubeconfig"
        command = [sys.executable, "-m", "cloudcoil_sync.testing", "serve"]
        command += ["--kubeconfig", str(self.kubeconfig), *args]
        self.process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, cwd=folder)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.reader = threading.Thread(target=self._read, name="serve-stderr")
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.put(line)
        self.lines.put(None)

    def wait_for(self, text: str, timeout: float = 30.0) -> str:
        while True:
            line = self.lines.get(timeout=timeout)
            assert line is not None, f"serve exited before printing {text!r}"
            if text in line:
                return line

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=30)
        self.reader.join(10)
        return code


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[type[Served]]:
    started: list[Served] = []

    def start(*args: str) -> Served:
        served = Served(tmp_path, *args)
        started.append(served)
        served.wait_for(READY)
        return served

    yield start  # type: ignore[misc]
    for served in started:
        if served.process.poll() is None:
            served.process.kill()
            served.process.wait(10)
        served.reader.join(10)


def test_serve_writes_an_admin_kubeconfig_and_keeps_state_across_restarts(
    serve: type[Served], tmp_path: Path
) -> None:
    state = tmp_path / "state.json"
    first = serve("--state", str(state))
    with Config.from_kubeconfig(str(first.kubeconfig)) as admin:
        created = admin.client(ConfigMap).raw.create({"metadata": {"name": "kept"}})
        admin.client(ServiceAccount).raw.create({"metadata": {"name": "op"}})
    command = ["token", "op", "--kubeconfig", str(first.kubeconfig)]
    minted = subprocess.run(
        [sys.executable, "-m", "cloudcoil_sync.testing", *command, "--write-kubeconfig", "op.kc"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert minted.returncode == 0, minted.stderr
    assert first.stop() == 0
    assert state.exists()

    second = serve("--state", str(state))
    with Config.from_kubeconfig(str(second.kubeconfig)) as admin:
        kept = admin.client(ConfigMap).raw.get("kept")
        assert kept["metadata"]["uid"] == created["metadata"]["uid"]
    # The minted token survived the restart: authenticated (403, not 401) as the SA.
    with (
        Config.from_kubeconfig(str(tmp_path / "op.kc")) as as_sa,
        pytest.raises(Forbidden, match="system:serviceaccount:default:op"),
    ):
        as_sa.client(ConfigMap).list()
    assert second.stop() == 0


def test_serve_progressing_deployments_never_become_available(serve: type[Served]) -> None:
    served = serve("--deployments", "progressing")
    with Config.from_kubeconfig(str(served.kubeconfig)) as admin:
        deployments = admin.client(Deployment).raw
        deployments.create(
            {
                "metadata": {"name": "d"},
                "spec": {
                    "selector": {"matchLabels": {"app": "d"}},
                    "template": {
                        "metadata": {"labels": {"app": "d"}},
                        "spec": {"containers": [{"name": "c", "image": "example/c:v1"}]},
                    },
                },
            }
        )
        watch = deployments.watch(field_selector="metadata.name=d", timeout_seconds=10)
        for event in watch:
            status = event.object.get("status") or {}
            if status.get("observedGeneration"):
                break
        watch.close()
        assert status.get("updatedReplicas") == 1 and not status.get("availableReplicas")
    assert served.stop() == 0


def test_serve_rejects_bad_options_in_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    bad = runner.invoke(cli, ["serve", "--deployments", "soon"])
    assert bad.exit_code == 2 and "is not available, progressing, off" in bad.output
    route = runner.invoke(cli, ["serve", "--route", "webhook:9443"])
    assert route.exit_code == 2 and "NAMESPACE/SERVICE=HOST:PORT" in route.output
    state = tmp_path / "state.json"
    state.write_text("[]")
    result = subprocess.run(
        [sys.executable, "-m", "cloudcoil_sync.testing", "serve", "--state", str(state)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"Error: {state} is not an emulator state file (format 'cloudcoil-sync.emulator/v1' "
        "expected)"
    ]
    missing = runner.invoke(cli, ["token", "op", "--kubeconfig", str(tmp_path / "none")])
    assert missing.exit_code == 1 and "none" in missing.output
