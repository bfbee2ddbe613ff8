"""The click CLI: `manifests` flags, exit statuses, one-line errors."""

from __future__ import annotations

import base64
import gc
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.application import Application
from cloudcoil_sync.application._internal.cli import build_cli, main

from .guard_app import app as guard
from .settings_app import app as settings

HERE = Path(__file__).parent


def invoke(app: Any, *args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(build_cli(app), list(args), env=env)


def one_line_error(result: Result, exit_code: int, text: str) -> None:
    assert result.exit_code == exit_code, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1
    assert text in result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture
def ca_file(tmp_path: Path, ca_pair: tuple[bytes, bytes]) -> Path:
    path = tmp_path / "ca.crt"
    path.write_bytes(ca_pair[0])
    return path


def documents(result: Result) -> list[dict[str, Any]]:
    assert result.exit_code == 0, result.stderr
    return list(yaml.safe_load_all(result.stdout))


def test_manifests_prints_the_manifests_as_yaml() -> None:
    result = invoke(settings, "manifests", "--image", "example/widgets:v1", "--replicas", "3")
    assert result.exit_code == 0, result.stderr
    expected = settings.manifests(image="example/widgets:v1", replicas=3)
    assert result.stdout == yaml.safe_dump_all(expected, sort_keys=False)
    assert result.stderr == ""


def test_command_is_split_like_a_shell_and_requires_an_image() -> None:
    docs = documents(
        invoke(settings, "manifests", "--image", "img", "--command", "python '/app/my app.py'")
    )
    (container,) = docs[-1]["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["python", "/app/my app.py"]
    assert container["args"] == ["run"]
    one_line_error(invoke(settings, "manifests", "--command", "python app.py"), 2, "--image")
    one_line_error(
        invoke(settings, "manifests", "--image", "i", "--command", "python 'app"), 2, "--command"
    )
    one_line_error(invoke(settings, "manifests", "--image", "i", "--command", " "), 2, "--command")


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_replicas_must_be_a_positive_integer(value: str) -> None:
    one_line_error(invoke(settings, "manifests", "--replicas", value), 2, "--replicas")


def test_ca_file_flag_and_environment_variable(
    ca_file: Path, ca_pair: tuple[bytes, bytes], tmp_path: Path
) -> None:
    for result in (
        invoke(guard, "manifests", "--image", "img", "--ca-file", str(ca_file)),
        invoke(
            guard, "manifests", "--image", "img", env={"CLOUDCOIL_WEBHOOK_CA_FILE": str(ca_file)}
        ),
    ):
        validating = documents(result)[-1]
        assert validating["kind"] == "ValidatingWebhookConfiguration"
        bundle = validating["webhooks"][0]["clientConfig"]["caBundle"]
        assert base64.b64decode(bundle) == ca_pair[0]


def test_private_key_in_the_ca_file_never_reaches_the_output(
    tmp_path: Path, ca_pair: tuple[bytes, bytes]
) -> None:
    combined = tmp_path / "combined.pem"
    combined.write_bytes(ca_pair[1] + ca_pair[0])
    result = invoke(guard, "manifests", "--image", "img", "--ca-file", str(combined))
    bundles = [
        base64.b64decode(hook["clientConfig"]["caBundle"])
        for doc in documents(result)
        for hook in doc.get("webhooks", [])
    ]
    assert bundles == [ca_pair[0]]
    assert "PRIVATE KEY" not in result.stdout
    key_body = b"".join(ca_pair[1].splitlines()[1:-1]).decode()
    assert key_body not in result.stdout


def test_ca_errors_are_usage_errors(
    tmp_path: Path, ca_file: Path, ca_pair: tuple[bytes, bytes]
) -> None:
    one_line_error(invoke(guard, "manifests"), 2, "ca_bundle must contain PEM certificate bytes")
    missing = tmp_path / "missing.crt"
    one_line_error(invoke(guard, "manifests", "--ca-file", str(missing)), 2, "cannot read")
    unreadable = tmp_path / "unreadable.crt"
    unreadable.write_bytes(ca_pair[0])
    unreadable.chmod(0)
    if os.geteuid() != 0:  # root reads anything
        one_line_error(invoke(guard, "manifests", "--ca-file", str(unreadable)), 2, "cannot read")
    one_line_error(invoke(guard, "manifests", "--ca-file", str(tmp_path)), 2, "--ca-file")
    key_only = tmp_path / "key.pem"
    key_only.write_bytes(ca_pair[1])
    one_line_error(
        invoke(guard, "manifests", "--ca-file", str(key_only)), 2, "contains no PEM certificate"
    )
    one_line_error(
        invoke(settings, "manifests", "--ca-file", str(ca_file)),
        2,
        "--ca-file requires a webhook server",
    )
    one_line_error(
        invoke(settings, "manifests", env={"CLOUDCOIL_WEBHOOK_CA_FILE": str(ca_file)}),
        2,
        "--ca-file (from CLOUDCOIL_WEBHOOK_CA_FILE) requires a webhook server",
    )


def test_without_webhooks_needs_no_ca_but_cannot_deploy_a_webhook_server() -> None:
    kinds = [doc["kind"] for doc in documents(invoke(guard, "manifests", "--without-webhooks"))]
    assert kinds == ["ServiceAccount"]
    one_line_error(
        invoke(guard, "manifests", "--without-webhooks", "--image", "img"),
        2,
        "requires its webhook TLS configuration",
    )


def test_definition_errors_exit_1_with_one_line() -> None:
    broken = Application("broken", namespace="ops")
    broken.controller(ConfigMap)  # no reconcile handler
    one_line_error(invoke(broken, "manifests"), 1, "Register exactly one entrypoint")


def test_usage_mistakes_exit_2() -> None:
    one_line_error(invoke(settings, "manifests", "--bogus"), 2, "--bogus")
    one_line_error(invoke(settings, "frobnicate"), 2, "frobnicate")
    result = invoke(settings)
    assert result.exit_code == 2
    assert "manifests" in result.stderr


def test_image_is_validated_and_resources_are_set_from_flags() -> None:
    one_line_error(
        invoke(settings, "manifests", "--image", "bad image!!"),
        2,
        "Invalid value for --image: image 'bad image!!' is not a valid image reference",
    )
    one_line_error(
        invoke(settings, "manifests", "--image", "ex/s:v1", "--limits", "memory=64Mi"),
        2,
        "resource requests.memory 128Mi is above its limit 64Mi",
    )
    one_line_error(
        invoke(settings, "manifests", "--image", "ex/s:v1", "--requests", "cpu"),
        2,
        "'cpu' is not NAME=QUANTITY",
    )
    result = invoke(
        settings, "manifests", "--image", "ex/s:v1", "--requests", "cpu=1,memory=1Gi",
        "--limits", "none",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    deployment = next(d for d in yaml.safe_load_all(result.stdout) if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"] == {"requests": {"cpu": "1", "memory": "1Gi"}}


def test_grace_period_covers_the_longest_drain() -> None:
    app = Application("slow")
    app.controller(ConfigMap, shutdown_timeout=120).reconcile()(lambda config: None)
    deployment = app.manifests(image="ex/slow:v1")[-1]
    # the drain, 30 s for a write on the wire, informers and leader lifespan 10 s each, and
    # 5 s to exit (no Lease to release, no health or webhook server)
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 175


def test_help_lists_every_command() -> None:
    result = invoke(settings, "--help")
    assert result.exit_code == 0
    for name in ("certs", "install", "manifests", "run", "uninstall"):
        assert name in result.stdout


def test_run_accepts_log_options_and_checks_them() -> None:
    one_line_error(invoke(settings, "run", "--log-format", "xml"), 2, "--log-format")
    one_line_error(invoke(settings, "run", "--log-level", "loud"), 2, "--log-level")


def test_main_returns_after_success_and_exits_nonzero_on_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    frozen: list[bool] = []
    # main() freezes the start-up heap; do not freeze the test session's.
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
    main(settings, ["manifests"])  # returns normally (no SystemExit) on success
    assert frozen == [True]
    assert "kind: Role" in capsys.readouterr().out
    with pytest.raises(SystemExit) as info:
        settings.main(["manifests", "--replicas", "0"])
    assert info.value.code == 2
    assert capsys.readouterr().err.startswith("Error: ")


def run_script(script: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(HERE / script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **env},
    )


def test_script_subprocess_success_and_one_line_errors(tmp_path: Path) -> None:
    done = run_script(
        "settings_app.py",
        "manifests",
        "--image",
        "example/widgets:v1",
        CLOUDCOIL_NAMESPACE="operators",
        KUBECONFIG=str(tmp_path / "missing"),
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    kinds = [doc["kind"] for doc in yaml.safe_load_all(done.stdout)]
    assert kinds == ["ServiceAccount", "Role", "RoleBinding", "Deployment"]
    assert "namespace: operators" in done.stdout

    for args, code, text in (
        (("manifests", "--replicas", "0"), 2, "--replicas"),
        (("manifests", "--command", "python app.py"), 2, "--image"),
    ):
        failed = run_script("settings_app.py", *args)
        assert failed.returncode == code
        assert failed.stdout == ""
        assert failed.stderr.count("\n") == 1 and failed.stderr.startswith("Error: ")
        assert text in failed.stderr
    failed = run_script("guard_app.py", "manifests", CLOUDCOIL_WEBHOOK_CA_FILE="")
    assert failed.returncode == 2
    assert failed.stderr.count("\n") == 1
    assert "ca_bundle must contain PEM certificate bytes" in failed.stderr


def test_run_explains_missing_webhook_tls_files(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLOUDCOIL_TLS_DIR", raising=False)
    result = invoke(guard, "run")
    one_line_error(result, 1, "Webhook TLS file does not exist: /var/run/cloudcoil/tls/tls.crt")
    assert "Secret 'guard-tls'" in result.stderr
    assert "certs --dir tls" in result.stderr and "run --tls-dir tls" in result.stderr
