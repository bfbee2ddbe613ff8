"""``install``/``uninstall`` from the command line: progress, dry run, one-line errors."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cloudcoil_sync.application._internal.cli import build_cli
from cloudcoil_sync.testing import Emulator

from .apps import gadgets
from .conftest import ROLLOUTS, write_kubeconfig
from .test_install import CRD, HOOKS, stored, take_replicas

pytestmark = ROLLOUTS
HERE = Path(__file__).parent


def invoke(app: Any, *args: str) -> Result:
    return CliRunner().invoke(build_cli(app), list(args))


def error_line(result: Result, exit_code: int = 1) -> str:
    """The single ``Error:`` line ending stderr (after any progress lines)."""
    assert result.exit_code == exit_code, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    last = result.stderr.splitlines()[-1]
    assert last.startswith("Error: ")
    assert result.stderr.count("Error") == 1 and result.stderr.endswith(last + "\n")
    return last


@pytest.fixture
def ca_file(kube: Emulator, tmp_path: Path) -> Path:
    path = tmp_path / "ca.crt"
    path.write_bytes(kube.ca_pem)
    return path


def test_install_and_uninstall_report_progress_on_stderr(
    kube: Emulator, kubeconfig: Path, ca_file: Path
) -> None:
    app = gadgets(None)  # CA comes from --ca-file below for the webhook app
    result = invoke(app, "install", "--image", "gadgets:v1")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    progress = result.stderr.splitlines()
    assert progress[0] == f"applied CustomResourceDefinition {CRD}: created"
    assert progress[-1].startswith("installed 5 objects in ")

    hooks = gadgets(b"")
    result = invoke(hooks, "install", "--image", "gadgets:v1", "--ca-file", str(ca_file), "-q")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == "" and result.stdout == ""
    assert stored(kube)["validating"] is not None

    result = invoke(hooks, "uninstall", "--include-crds")
    assert result.exit_code == 0, result.stderr
    assert f"deleted MutatingWebhookConfiguration {HOOKS}" in result.stderr.splitlines()
    assert result.stderr.splitlines()[-1].startswith("uninstalled in ")
    assert all(obj is None for obj in stored(kube).values())


def test_dry_runs_print_one_line_per_object_on_stdout(kube: Emulator, kubeconfig: Path) -> None:
    app = gadgets(None)
    result = invoke(app, "install", "--image", "gadgets:v1", "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"created CustomResourceDefinition {CRD}",
        "created ServiceAccount operators/gadgets",
        "created Role operators/gadgets.operators",
        "created RoleBinding operators/gadgets.operators",
        "created Lease operators/gadgets: released, the first replica leads at once",
        "created Deployment operators/gadgets",
    ]
    assert result.stderr.splitlines() == [
        "dry run: 6 objects (6 created, 0 unchanged); nothing was changed"
    ]
    assert all(obj is None for obj in stored(kube).values())
    result = invoke(app, "uninstall", "--dry-run", "--quiet")
    assert result.exit_code == 0 and result.stderr == ""
    assert result.stdout.splitlines()[0] == "absent Deployment operators/gadgets"


def test_conflict_is_one_line_and_force_resolves_it(kube: Emulator, kubeconfig: Path) -> None:
    app = gadgets(None)
    assert invoke(app, "install", "--image", "gadgets:v1", "-q").exit_code == 0
    take_replicas(kube, 4)
    line = error_line(invoke(app, "install", "--image", "gadgets:v1", "-q"))
    assert line.startswith(
        "Error: Deployment operators/gadgets: field .spec.replicas is owned by field manager "
        "'kubectl'; rerun with --force"
    )
    result = invoke(app, "install", "--image", "gadgets:v1", "--force")
    assert result.exit_code == 0, result.stderr
    assert "applied Deployment operators/gadgets: configured (.spec.replicas)" in result.stderr


@pytest.mark.kube_emulator(deployments="never")
def test_timeout_is_one_line_naming_the_wait(kube: Emulator, kubeconfig: Path) -> None:
    line = error_line(invoke(gadgets(None), "install", "--image", "gadgets:v1", "--timeout", "0.4"))
    assert line.startswith(
        "Error: timed out after 0.4 s waiting for Deployment operators/gadgets to be available"
    )


def test_webhooks_without_image_is_a_usage_error(
    kube: Emulator, kubeconfig: Path, ca_file: Path
) -> None:
    result = invoke(gadgets(b""), "install", "--ca-file", str(ca_file))
    line = error_line(result, 2)
    assert line.startswith("Error: Invalid value for --image / --without-webhooks: ")
    assert "Installing webhooks requires image=... to wait for a serving Deployment" in line
    assert kube.request_log == []
    assert error_line(invoke(gadgets(None), "install", "--timeout", "inf"), 2)


def test_forbidden_is_one_line_with_exit_status_1(
    kube: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kube.add_token("nobody-token", "nobody")
    path = write_kubeconfig(tmp_path / "config", kube.url, "nobody-token", kube.ca_pem)
    monkeypatch.setenv("KUBECONFIG", str(path))
    line = error_line(invoke(gadgets(None), "install"))
    assert line.startswith(f"Error: applying CustomResourceDefinition {CRD} failed: 403 Forbidden")
    line = error_line(invoke(gadgets(None), "uninstall"))
    assert "403 Forbidden" in line


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_unreachable_server_is_one_line_with_exit_status_1(
    kube: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"https://127.0.0.1:{closed_port()}"
    path = write_kubeconfig(tmp_path / "config", url, "token", kube.ca_pem)
    monkeypatch.setenv("KUBECONFIG", str(path))
    line = error_line(invoke(gadgets(None), "install", "--timeout", "5"))
    assert line.startswith(f"Error: applying CustomResourceDefinition {CRD} failed:")
    assert "127.0.0.1" in line
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert "no Kubernetes configuration found" in error_line(invoke(gadgets(None), "uninstall"))


def test_script_reports_forbidden_as_one_line(kube: Emulator, tmp_path: Path) -> None:
    kube.add_token("nobody-token", "nobody")
    path = write_kubeconfig(tmp_path / "config", kube.url, "nobody-token", kube.ca_pem)
    env = {**os.environ, "KUBECONFIG": str(path)}
    done = subprocess.run(
        [sys.executable, str(HERE / "gadgets_app.py"), "install", "--timeout", "20"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(
        f"Error: applying CustomResourceDefinition {CRD} failed: 403 Forbidden"
    )


def test_without_webhooks_flag_installs_crds_and_rbac_of_a_webhook_app(
    kube: Emulator, kubeconfig: Path
) -> None:
    result = invoke(gadgets(b""), "install", "--without-webhooks")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines()[-1].startswith("installed 4 objects in ")
    objects = stored(kube)
    assert objects["crd"] is not None and objects["role"] is not None
    assert objects["service"] is None and objects["deployment"] is None
    assert objects["mutating"] is None and objects["validating"] is None


LEASES = ("coordination.k8s.io", "v1", "leases")


def test_uninstall_of_a_loopback_bound_operator_removes_its_renewed_lease(
    kube: Emulator, kubeconfig: Path
) -> None:
    from cloudcoil.models.kubernetes.core.v1 import ConfigMap

    from cloudcoil_sync.application import Application, WebhookServer
    from cloudcoil_sync.controller import HealthServer

    app = Application("local", namespace="operators", leader_election=True, health=HealthServer())
    app.controller(ConfigMap).reconcile()(lambda config: None)
    assert app.health is not None and app.health.host == "127.0.0.1"  # a local run's default
    dry = invoke(app, "install", "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    assert "created Lease operators/local: released, the first replica leads at once" in (
        dry.stdout.splitlines()
    )
    assert invoke(app, "install", "-q").exit_code == 0
    with kube.config(namespace="operators") as replica:  # a replica renews it as itself
        leases = replica.client(LEASES)
        lease = leases.get("local")
        lease["spec"].update(holderIdentity="replica-1", leaseDurationSeconds=15)
        leases.replace(lease, field_manager="cloudcoil-sync-leader")
    dry = invoke(app, "uninstall", "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    assert "would delete Lease operators/local" in dry.stdout.splitlines()
    assert kube.get_object("coordination.k8s.io", "leases", "operators", "local") is not None
    removed = invoke(app, "uninstall")
    assert removed.exit_code == 0, removed.stderr
    assert "deleted Lease operators/local" in removed.stderr.splitlines()
    assert kube.get_object("coordination.k8s.io", "leases", "operators", "local") is None

    hooks = Application(
        "hooks", namespace="operators", webhook=WebhookServer(host="127.0.0.1", ca_bundle=b"")
    )
    hooked = hooks.controller(ConfigMap)
    hooked.reconcile()(lambda config: None)
    hooked.validate()(lambda config: None)
    dry = invoke(hooks, "uninstall", "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    assert "absent Deployment operators/hooks" in dry.stdout.splitlines()
