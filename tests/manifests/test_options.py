"""`ManifestOptions`: the keywords of ``manifests``/``install`` and the deployment flags are one
value, checked in one place: the library raises cloudcoil 0.8's message, the command line says
the same message on one line, naming the flags."""

from __future__ import annotations

import re
from typing import Any

import pytest
from click.testing import CliRunner
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.application import Application, WebhookServer, build_cli
from cloudcoil_sync.application._internal.options import ManifestOptions, OptionError

from .apps import Widget


def controllers() -> Application:
    app = Application("settings", namespace="ops")
    app.controller(ConfigMap).reconcile()(lambda cm: None)
    return app


def admission(ca: bytes) -> Application:
    app = Application("widgets", namespace="ops", webhook=WebhookServer(ca_bundle=ca))
    app.validate(Widget)(lambda request: None)
    return app


CASES = [
    ({"replicas": 0}, ["--replicas", "0"], None, "replicas must be a positive integer"),
    (
        {"command": ["python", "op.py"]},
        ["--command", "python op.py"],
        "--command / --image",
        "command requires image",
    ),
    (
        {"image": "Bad Image"},
        ["--image", "Bad Image"],
        "--image",
        "image 'Bad Image' is not a valid image reference",
    ),
    (
        {"image": "img", "limits": {"memory": "64Mi"}},
        ["--image", "img", "--limits", "memory=64Mi"],
        "--requests / --limits",
        "resource requests.memory 128Mi is above its limit 64Mi",
    ),
    (
        {"image": "img", "requests": {"gpu": "1"}},
        ["--image", "img", "--requests", "gpu=1"],
        "--requests / --limits",
        "resource requests: unknown resource 'gpu'",
    ),
]


@pytest.mark.parametrize(("keywords", "argv", "flags", "message"), CASES)
def test_one_check_for_the_keywords_and_the_flags(
    keywords: dict[str, Any], argv: list[str], flags: str | None, message: str
) -> None:
    with pytest.raises(OptionError, match=f"^{re.escape(message)}") as raised:
        controllers().manifests(**keywords)
    assert isinstance(raised.value, ValueError)  # as cloudcoil 0.8 raises it
    result = CliRunner().invoke(build_cli(controllers()), ["manifests", *argv])
    assert result.exit_code == 2, result.stderr
    if flags is None:  # click's own range check of --replicas comes first
        assert result.stderr.startswith("Error: Invalid value for '--replicas'"), result.stderr
        return
    assert result.stderr.startswith(f"Error: Invalid value for {flags}: {message}"), result.stderr
    assert result.stderr.count("\n") == 1


def test_checks_against_the_operator_name_the_keywords_and_the_flags(
    ca_pair: tuple[bytes, bytes],
) -> None:
    with pytest.raises(OptionError, match="requires its webhook TLS configuration") as raised:
        admission(ca_pair[0]).manifests(image="img", include_webhooks=False)
    assert raised.value.options == ("include_webhooks", "image")
    argv = ["manifests", "--image", "img", "--without-webhooks"]
    result = CliRunner().invoke(build_cli(admission(ca_pair[0])), argv)
    assert result.exit_code == 2
    assert result.stderr == (
        "Error: Invalid value for --without-webhooks / --image: "
        "A Deployment for this operator requires its webhook TLS configuration\n"
    )
    with pytest.raises(OptionError, match=r"^ca_bundle must contain PEM certificate bytes$"):
        admission(b"").manifests()
    result = CliRunner().invoke(build_cli(admission(b"")), ["manifests"])
    assert result.exit_code == 2
    assert "--ca-file / --without-webhooks: ca_bundle must contain PEM" in result.stderr


def test_the_value_is_what_the_commands_deploy() -> None:
    options = ManifestOptions(image="example/s:v1", command=("python", "op.py"), replicas=2)
    app = controllers()
    documents = app.manifests(image="example/s:v1", command=("python", "op.py"), replicas=2)
    assert documents[-1]["spec"]["replicas"] == options.replicas == 2
    (container,) = documents[-1]["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["python", "op.py"]
    assert container["resources"] == options.resources()
    with pytest.raises(TypeError, match="imgae"):
        app.install(imgae="example/s:v1")  # type: ignore[call-arg]
