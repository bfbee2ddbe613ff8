"""`manifests` is offline: no socket, no kubeconfig, no TLS files, no webhook server import."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cloudcoil_sync.application._internal.cli import build_cli

from .apps import APPS

CLI_APPS = Path(__file__).parent.parent / "cli"


def test_no_socket_and_no_kubeconfig(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ca_pair: tuple[bytes, bytes]
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing-kubeconfig"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    opened: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        opened.append(args)
        raise AssertionError("manifests must not open a socket")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(ca_pair[0])
    for name, build in APPS.items():
        app, options = build(ca_pair[0])
        assert app.manifests(**options), name
        result = CliRunner().invoke(
            build_cli(app),
            ["manifests", "--image", "img", "--ca-file", str(ca_file)]
            if app.webhook is not None
            else ["manifests", "--image", "img"],
        )
        assert result.exit_code == 0, (name, result.stderr)
        assert "kind: ServiceAccount" in result.stdout
    assert opened == []


def test_tls_files_are_never_read(ca_pair: tuple[bytes, bytes]) -> None:
    # The widget app's certfile/keyfile do not exist here; manifests only names them.
    app, options = APPS["widgets"](ca_pair[0])
    assert not Path(app.webhook.keyfile).exists()
    deployment = next(d for d in app.manifests(**options) if d["kind"] == "Deployment")
    assert deployment["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"] == (
        "widgets-tls"
    )


def test_manifests_command_never_imports_the_webhook_server(
    tmp_path: Path, ca_pair: tuple[bytes, bytes]
) -> None:
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(ca_pair[0])
    argv = ["guard_app.py", "manifests", "--image", "img", "--ca-file", str(ca_file)]
    script = str(CLI_APPS / "guard_app.py")
    check = (
        "import runpy, sys\n"
        f"sys.argv = {argv!r}\n"
        f"runpy.run_path({script!r}, run_name='__main__')\n"
        "assert 'waitress' not in sys.modules, 'manifests imported waitress'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "kind: ValidatingWebhookConfiguration" in done.stdout
