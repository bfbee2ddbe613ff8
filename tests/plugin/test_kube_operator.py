"""The ``kube_operator`` fixture: the operator under test runs as its generated ServiceAccount,
a missing permission fails the test with kube-apiserver's 403, ``admin=True`` opts out, and
``--cloudcoil-rbac-report`` lists what the generated RBAC grants that nothing used."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

USER_TEST = """
import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap, Secret

from cloudcoil_sync.application import Application, RBACRule
from cloudcoil_sync.client import NotFound


def settings_app(read_secrets: bool = False) -> Application:
    rules = (RBACRule(Secret, ("get",)),) if read_secrets else ()
    app = Application("settings", rules=rules)
    configs = app.controller(ConfigMap, label_selector="example.com/manage=true")

    @configs.reconcile()
    def reconcile(config: ConfigMap, ctx) -> ConfigMap:
        try:
            secret = ctx.client(Secret).get("settings-secret")  # needs get secrets
            colour = (secret.string_data or {}).get("colour", "none")
        except NotFound:
            colour = "none"
        config.data = {**(config.data or {}), "managed-by": "cloudcoil", "secret": colour}
        return config

    return app


def _managed(kube_emulator, kube_operator, app):
    config = kube_operator(app)
    config.client(ConfigMap).raw.create(
        {"metadata": {"name": "a", "labels": {"example.com/manage": "true"}}}
    )

    def seen():
        obj = kube_emulator.get_object("", "configmaps", "default", "a")
        return obj is not None and (obj.get("data") or {}).get("managed-by") == "cloudcoil"

    return kube_emulator.wait_for(seen, timeout=5)


def test_missing_permission(kube_emulator, kube_operator):
    _managed(kube_emulator, kube_operator, settings_app())


@pytest.mark.kube_operator(admin=True)
def test_missing_permission_as_admin(kube_emulator, kube_operator):
    assert _managed(kube_emulator, kube_operator, settings_app())


def test_declared_permission(kube_emulator, kube_operator):
    assert _managed(kube_emulator, kube_operator, settings_app(read_secrets=True))
"""


def _pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (project / "test_settings_operator.py").write_text(USER_TEST)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n0", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_missing_permission_fails_and_admin_passes(tmp_path: Path) -> None:
    result = _pytest(tmp_path, "-rA", "--cloudcoil-rbac-report")
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "3 passed, 1 error" in out, out  # the call passes; the 403 fails its teardown
    assert "ERROR at teardown of test_missing_permission " in out
    assert (
        'secrets "settings-secret" is forbidden: User "system:serviceaccount:default:settings" '
        'cannot get resource "secrets" in API group "" in the namespace "default"'
    ) in out
    assert "PASSED test_settings_operator.py::test_missing_permission_as_admin" in out
    assert "PASSED test_settings_operator.py::test_declared_permission" in out
    report = out.split("cloudcoil_sync RBAC report", 1)[1]
    assert "default/settings:" in report
    assert "never used: get secrets (core)" not in report  # used by test_declared_permission
    assert "5 of 6 granted permissions used" in report
    assert "never used: get configmaps (core)" in report  # generated: informers list+watch


def test_the_rbac_report_merges_what_xdist_workers_saw(tmp_path: Path) -> None:
    result = _pytest(tmp_path, "-n", "2", "--cloudcoil-rbac-report")
    out = result.stdout
    assert "3 passed, 1 error" in out, out + result.stderr
    report = out.split("cloudcoil_sync RBAC report", 1)[1]
    assert "default/settings: 5 of 6 granted permissions used" in report, report
    assert "never used: get configmaps (core)" in report
