"""The ``run`` command: signals, exit codes, one-line errors, log formats; and a real process."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cloudcoil_sync._internal import logs
from cloudcoil_sync.application import Application
from cloudcoil_sync.application._internal.cli import build_cli
from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import ResourceKey
from cloudcoil_sync.testing import Emulator

from .apps import settings_app
from .conftest import (
    LEASES,
    configmap,
    fast_election,
    lease,
    managed,
    released_lease,
    wait_until,
    write_kubeconfig,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in root.handlers[:]:
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)


def when_ready(app: Application, action: object) -> threading.Thread:
    """Run `action()` on a thread once `app` is ready (the CLI blocks the main thread)."""

    def target() -> None:
        try:
            app.wait_ready(timeout=20)
        finally:
            action()  # type: ignore[operator]  # even when not ready: the CLI must end

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_gracefully_and_handlers_are_restored(
    kube_emulator: Emulator, kube_config: Config, signum: signal.Signals
) -> None:
    kube_emulator.create_object(configmap("cli"))
    app = settings_app(config=kube_config)
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    reconciled: list[bool] = []

    def reconciled_then_signal() -> None:
        # Ready means synced with workers running, not that the first pass has written:
        # the signal waits for that write, or a stop could (rightly) refuse the pass.
        try:
            reconciled.append(wait_until(lambda: managed(kube_emulator, "cli"), timeout=15))
        finally:
            os.kill(os.getpid(), signum)  # always: a CLI left running would hang the suite

    helper = when_ready(app, reconciled_then_signal)
    build_cli(app).main(["run", "--log-format", "json", "--log-level", "debug"])
    helper.join(5)
    assert {s: signal.getsignal(s) for s in previous} == previous
    assert reconciled == [True] and managed(kube_emulator, "cli")
    assert not kube_config.transport.closed


def test_lost_leadership_exits_non_zero_with_one_line(
    kube_config: Config, capsys: pytest.CaptureFixture[str]
) -> None:
    released_lease(kube_config)
    app = settings_app(config=kube_config, leader_election=fast_election())
    helper = when_ready(app, lambda: kube_config.client(LEASES).delete("settings"))
    with pytest.raises(SystemExit) as exit_info:
        build_cli(app).main(["run"])
    helper.join(5)
    assert exit_info.value.code == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].startswith("Error: Lost leadership of Lease settings: the Lease was deleted")
    assert "Traceback" not in capsys.readouterr().err


def test_runtime_failure_is_one_line(
    kube_config: Config, capsys: pytest.CaptureFixture[str]
) -> None:
    from .test_manager import widgets

    app = settings_app(config=kube_config)
    app.include(widgets(sync_timeout=10))
    with pytest.raises(SystemExit) as exit_info:
        build_cli(app).main(["run", "--log-level", "critical"])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("Error: InformerFailed: Informer widgets")
    assert "is its CRD installed" in err


def test_invalid_definition_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    app = Application("empty")
    with pytest.raises(SystemExit) as exit_info:
        build_cli(app).main(["run"])
    assert exit_info.value.code == 1
    assert capsys.readouterr().err == "Error: An application needs controllers or webhooks\n"


def test_json_log_lines() -> None:
    import io

    stream = io.StringIO()
    logs.configure("info", "json", stream=stream)
    log = logs.get_logger("controller.settings")
    log.debug("hidden")
    log.info("reconciled %s", "a", extra={"key": ResourceKey("a", "default"), "pair": (1, 2)})
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed")
    logs.configure("warning", "text", stream=stream)  # replaces the JSON handler
    log.warning("plain")
    lines = stream.getvalue().splitlines()
    first = json.loads(lines[0])
    assert first["logger"] == "cloudcoil_sync.controller.settings"
    assert (first["level"], first["message"], first["key"]) == ("INFO", "reconciled a", "default/a")
    assert first["pair"] == [1, 2]  # a plain tuple stays a list
    assert first["time"].endswith("+00:00")
    second = json.loads(lines[1])
    assert second["level"] == "ERROR" and "ValueError: boom" in second["exception"]
    assert lines[-1].endswith("WARNING cloudcoil_sync.controller.settings: plain")
    assert sum(1 for line in lines if line.startswith("{")) == 2
    with pytest.raises(ValueError, match="Log format must be one of text, json"):
        logs.configure("info", "xml")


APP = textwrap.dedent(
    """
    from cloudcoil.models.kubernetes.core.v1 import ConfigMap
    from cloudcoil_sync.application import Application

    app = Application("settings", leader_election=True)
    configs = app.controller(ConfigMap, label_selector="example.com/manage=true")

    @configs.reconcile()
    def reconcile(config: ConfigMap) -> ConfigMap:
        config.data = {**(config.data or {}), "managed-by": "cloudcoil"}
        return config

    if __name__ == "__main__":
        app.main()
    """
)


def test_operator_process_reconciles_and_stops_on_sigterm(
    kube_emulator: Emulator, kube_config: Config, tmp_path: Path
) -> None:
    (tmp_path / "app.py").write_text(APP)
    # A released Lease, as a previous replica leaves it: this one leads at once.
    released_lease(kube_config)
    kube_emulator.create_object(configmap("from-process"))
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("KUBE", "CLOUDCOIL_"))
    }
    env["KUBECONFIG"] = str(write_kubeconfig(kube_emulator, tmp_path / "kubeconfig"))
    env["PYTHONPATH"] = str(REPO)
    stderr = (tmp_path / "stderr").open("w+")
    process = subprocess.Popen(
        [sys.executable, str(tmp_path / "app.py"), "run", "--log-format", "json"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )
    try:
        reconciled = kube_emulator.wait_for(
            lambda: managed(kube_emulator, "from-process") or process.poll() is not None,
            timeout=60,
        )
        assert reconciled and process.poll() is None, _output(stderr)
        holder = lease(kube_emulator)["spec"]["holderIdentity"]
        assert holder.startswith(os.uname().nodename)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0, _output(stderr)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert lease(kube_emulator)["spec"]["holderIdentity"] == ""
    records = [json.loads(line) for line in _output(stderr).splitlines() if line.strip()]
    messages = [record["message"] for record in records]
    assert any(message.startswith("Received SIGTERM") for message in messages)
    assert "Released Lease settings" in messages
    assert all(record["logger"].startswith("cloudcoil_sync") for record in records)


def _output(stream: object) -> str:
    stream.seek(0)  # type: ignore[attr-defined]
    return str(stream.read())  # type: ignore[attr-defined]
