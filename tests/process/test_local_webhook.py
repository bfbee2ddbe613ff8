"""A webhook operator run locally: ``certs`` writes its TLS files, ``run --tls-dir
--webhook-host --webhook-port`` serves admission from them, the emulator calls it over TLS."""

from __future__ import annotations

import importlib.util
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner
from cryptography import x509
from ports import free_port

from cloudcoil_sync.application._internal.cli import build_cli
from cloudcoil_sync.testing import Emulator

from .conftest import write_kubeconfig

REPO = Path(__file__).resolve().parents[2]
APP = textwrap.dedent(
    """
    from cloudcoil.models.kubernetes.core.v1 import ConfigMap
    from cloudcoil_sync.admission import AdmissionRequest
    from cloudcoil_sync.application import Application, WebhookServer

    app = Application("hooks", webhook=WebhookServer(tls_secret="hooks-tls"))
    configs = app.controller(ConfigMap, label_selector="example.com/manage=true")

    @configs.reconcile()
    def reconcile(config: ConfigMap) -> None:
        return None

    @configs.mutate()
    def mark(request: AdmissionRequest[ConfigMap]) -> ConfigMap | None:
        config = request.resource
        if config is None or config.metadata is None:
            return None
        config.metadata.labels = {**(config.metadata.labels or {}), "mutated": "locally"}
        return config

    if __name__ == "__main__":
        app.main()
    """
)


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"local_{path.parent.name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.kube_emulator(deployments="available")
def test_certs_then_run_with_local_tls_serves_admission(
    kube_emulator: Emulator, tmp_path: Path
) -> None:
    script = tmp_path / "hooks.py"
    script.write_text(APP)
    kubeconfig = write_kubeconfig(kube_emulator, tmp_path / "kubeconfig")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "CLOUDCOIL_"))}
    env.update(KUBECONFIG=str(kubeconfig), PYTHONPATH=str(REPO))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        # As the user runs it: admission paths are derived from the script's module (__main__).
        return subprocess.run(
            [sys.executable, str(script), *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    tls = tmp_path / "tls"
    written = cli("certs", "--dir", "tls")
    assert written.returncode == 0, written.stderr
    assert stat.S_IMODE((tls / "tls.key").stat().st_mode) == 0o600
    cert = x509.load_pem_x509_certificate((tls / "tls.crt").read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "hooks.default.svc" in names.get_values_for_type(x509.DNSName)
    again = cli("certs", "--dir", "tls")
    assert again.returncode == 1 and "exists (pass --force to replace it)" in again.stderr
    installed = cli("install", "-q", "--image", "example/hooks:v1", "--ca-file", "tls/ca.crt")
    assert installed.returncode == 0, installed.stderr

    port = free_port()
    kube_emulator.route_service("default", "hooks", "127.0.0.1", port)
    env["CLOUDCOIL_WEBHOOK_PORT"] = str(port)
    command = [sys.executable, str(script), "run", "--tls-dir", str(tls)]
    with (tmp_path / "stderr").open("w") as stderr:
        process = subprocess.Popen(
            [*command, "--webhook-host", "127.0.0.1"], cwd=tmp_path, env=env, stderr=stderr
        )
    try:
        config = kube_emulator.config()
        configs = config.client(("", "v1", "configmaps"))

        def admitted() -> bool:  # the registration fails closed until the server listens
            try:
                configs.create({"metadata": {"name": "probe", "labels": {"x": "y"}}})
            except Exception:
                return process.poll() is not None  # stop retrying if the operator died
            return True

        assert kube_emulator.wait_for(admitted, timeout=30)
        assert process.poll() is None, (tmp_path / "stderr").read_text()
        probe = kube_emulator.get_object("", "configmaps", "default", "probe")
        assert probe is not None and probe["metadata"]["labels"]["mutated"] == "locally"
        config.close()
    finally:
        process.terminate()
        assert process.wait(30) == 0, (tmp_path / "stderr").read_text()
    log = (tmp_path / "stderr").read_text()
    assert f"Serving admission webhooks on https://127.0.0.1:{port}" in log


def test_local_webhook_flags_are_checked(tmp_path: Path) -> None:
    script = tmp_path / "hooks.py"
    script.write_text(APP)
    app = _load(script).app
    missing = CliRunner().invoke(build_cli(app), ["run", "--tls-dir", str(tmp_path / "none")])
    assert missing.exit_code == 2
    assert f"cannot read {tmp_path / 'none' / 'tls.crt'}" in missing.stderr
    from cloudcoil.models.kubernetes.core.v1 import ConfigMap

    from cloudcoil_sync.application import Application

    plain = Application("plain")
    plain.controller(ConfigMap).reconcile()(lambda config: None)
    wrong = CliRunner().invoke(build_cli(plain), ["run", "--webhook-port", "9443"])
    assert wrong.exit_code == 2 and "--webhook-port requires a WebhookServer" in wrong.stderr
    certs = CliRunner().invoke(build_cli(plain), ["certs"])
    assert certs.exit_code == 2 and "certs requires a WebhookServer" in certs.stderr
