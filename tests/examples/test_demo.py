"""``make demo`` (examples/demo.py) run headless as a subprocess: the Widget reaches Ready."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from example_harness import EXAMPLES


def test_demo_runs_the_widget_operator_to_ready(tmp_path: Path) -> None:
    # From another directory, with no kubeconfig: the demo needs nothing but the package.
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KUBECONFIG": str(tmp_path / "none")}
    if "PYTHONPATH" in os.environ:  # e.g. a checkout tested with another checkout's venv
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "demo.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "== Installing the operator" in out
    assert "child deployment/hello (available 2/2)" in out
    assert "recreated by the operator: configmap/hello-config" in out
    assert "child deployment/hello (available 3/3)" in out
    assert "Ready                True" in out
    assert "'app.kubernetes.io/managed-by': 'widgets'" in out
    assert "denied: 403 Forbidden" in out and "exceeds the policy's 3" in out
    assert "== widget/hello is Ready after" in out
    # install's progress goes to stderr, as the CLI's does.
    assert "installed 11 objects" in done.stderr  # + the secure-metrics RBAC
    assert "Traceback" not in done.stderr
