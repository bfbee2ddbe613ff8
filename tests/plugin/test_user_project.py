"""The pytest plugin works in a user's own project: plain ``pytest``, no options, no ini file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

USER_TEST = """
import threading

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.application import Application


def test_operator_manages_labelled_configmaps(kube_emulator, kube_config):
    app = Application("settings", config=kube_config)
    configs = app.controller(ConfigMap, label_selector="example.com/manage=true")

    @configs.reconcile()
    def reconcile(config: ConfigMap) -> ConfigMap:
        config.data = {**(config.data or {}), "managed-by": "cloudcoil"}
        return config

    stop = threading.Event()
    runner = threading.Thread(target=app.run, kwargs={"stop": stop})
    runner.start()
    try:
        app.wait_ready(timeout=10)
        kube_config.client(ConfigMap).raw.create(
            {"metadata": {"name": "a", "labels": {"example.com/manage": "true"}}}
        )

        def managed():
            obj = kube_emulator.get_object("", "configmaps", "default", "a")
            return obj is not None and (obj.get("data") or {}).get("managed-by") == "cloudcoil"

        assert kube_emulator.wait_for(managed, timeout=10)
    finally:
        stop.set()
        runner.join(30)


@pytest.mark.kube_emulator(history_size=7)
def test_marker_options(kube_emulator):
    assert kube_emulator.store.history_size == 7
"""


def test_plain_pytest_in_a_fresh_project_loads_the_plugin(tmp_path: Path) -> None:
    project = tmp_path / "my-operator"
    project.mkdir()
    (project / "test_my_operator.py").write_text(USER_TEST)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "test_my_operator.py"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    output = result.stdout + result.stderr
    assert "Error while loading plugin" not in output, output
    assert result.returncode == 0, output
    assert "2 passed" in result.stdout, output
