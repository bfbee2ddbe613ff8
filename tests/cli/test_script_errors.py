"""Errors of an operator script run as a CLI.

A definition mistake in the script body (``Application("Bad_Name")``, ``workers=0``, an
``async def`` handler) raises at once, as cloudcoil 0.8 does: Python's traceback, pointing at
the script line, ending in a message that names the bad value. Errors that reach the command
line (``app.main()``: bad flags, whole-application checks, API errors) are one ``Error:`` line.
Nothing installs a process-wide ``sys.excepthook``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HEADER = """\
from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from cloudcoil_sync.application import Application
"""
FOOTER = """
if __name__ == "__main__":
    app.main()
"""


def run(tmp_path: Path, body: str, *args: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "op.py"
    script.write_text(HEADER + textwrap.dedent(body) + FOOTER)
    return subprocess.run(
        [sys.executable, "op.py", *(args or ("manifests",))],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=os.environ.copy(),
    )


def traceback_ending(done: subprocess.CompletedProcess[str], line: int, last: str) -> None:
    """Python's own report: the script line in the traceback, the message last."""
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith("Traceback (most recent call last):"), done.stderr
    assert f'op.py", line {line}, in <module>' in done.stderr, done.stderr
    assert done.stderr.rstrip().splitlines()[-1].startswith(last), done.stderr


def test_a_bad_application_name_raises_naming_the_value_and_the_rule(tmp_path: Path) -> None:
    done = run(tmp_path, 'app = Application("Bad_Name")\n')
    traceback_ending(
        done, 3, "ValueError: Application name must be a Kubernetes DNS label, got 'Bad_Name'"
    )
    assert "RFC 1123" in done.stderr and "DNS-1123" in done.stderr


@pytest.mark.parametrize(
    ("body", "line", "last"),
    [
        (
            'app = Application("ok")\napp.controller(ConfigMap, workers=0)\n',
            4,
            "ValueError: workers must be a positive integer, got 0",
        ),
        (
            'app = Application("ok")\napp.controller(ConfigMap, shutdown_timeout=-1)\n',
            4,
            "ValueError: shutdown_timeout must be finite and positive, got -1",
        ),
        (
            """\
            app = Application("ok")
            configs = app.controller(ConfigMap)

            @configs.reconcile()
            async def reconcile(cm):
                return cm
            """,
            6,
            "TypeError: reconcile: handlers must be synchronous; use def, not async def",
        ),
        (
            """\
            app = Application("ok")
            configs = app.controller(ConfigMap)

            @configs.validate(operations=("PATCH",))
            def check(request):
                pass
            """,
            6,
            "ValueError: operations must contain unique CREATE, UPDATE, or DELETE entries, "
            "got ('PATCH',)",
        ),
        (
            """\
            from cloudcoil_sync.controller import LeaderElection
            app = Application("ok", leader_election=LeaderElection("Bad_Name"))
            """,
            4,
            "ValueError: Lease name and namespace must be valid Kubernetes DNS names, "
            "got 'Bad_Name'",
        ),
        (
            """\
            from cloudcoil_sync.application import WebhookServer
            app = Application("ok", webhook=WebhookServer(port=70000))
            """,
            4,
            "ValueError: Webhook ports must be integers between 1 and 65535, got 70000",
        ),
    ],
    ids=["workers", "timeout", "async-handler", "route", "lease-name", "webhook-port"],
)
def test_definition_mistakes_raise_at_once_naming_the_bad_value(
    tmp_path: Path, body: str, line: int, last: str
) -> None:
    traceback_ending(run(tmp_path, body), line, last)


def one_line(done: subprocess.CompletedProcess[str], exit_code: int, text: str) -> None:
    assert done.returncode == exit_code, done.stderr
    assert done.stderr.startswith("Error: ") and done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr and text in done.stderr, done.stderr


def test_errors_that_reach_the_command_line_are_one_line(tmp_path: Path) -> None:
    # A whole-application check, made when the command reads the definition.
    no_handler = 'app = Application("ok")\napp.controller(ConfigMap)\n'
    one_line(run(tmp_path, no_handler), 1, "Register exactly one entrypoint")
    # A bad flag.
    fine = 'app = Application("ok")\napp.controller(ConfigMap).reconcile()(lambda cm: None)\n'
    one_line(run(tmp_path, fine, "manifests", "--replicas", "0"), 2, "--replicas")
    one_line(
        run(tmp_path, fine, "manifests", "--image", "Bad Image"),
        2,
        "Invalid value for --image: image 'Bad Image' is not a valid image reference",
    )


HOOK = "print('default hook:', sys.excepthook is sys.__excepthook__)\n"


def test_nothing_installs_a_global_excepthook(tmp_path: Path) -> None:
    (tmp_path / "check.py").write_text(
        "import sys\n"
        "import cloudcoil_sync, cloudcoil_sync.application, cloudcoil_sync.controller\n"
        "import cloudcoil_sync.admission, cloudcoil_sync.crd, cloudcoil_sync.testing\n"
        + HEADER
        + "from cloudcoil_sync.controller import HealthServer, LeaderElection\n"
        + HOOK
        + "app = Application('ok', health=HealthServer(), leader_election=LeaderElection('ok'))\n"
        + "app.controller(ConfigMap).reconcile()(lambda cm: None)\n"
        + HOOK
        + "try:\n    app.main(['--help'])\nexcept SystemExit:\n    pass\n"
        + HOOK,
    )
    done = subprocess.run(
        [sys.executable, "check.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    states = [line for line in done.stdout.splitlines() if line.startswith("default hook:")]
    assert states == ["default hook: True"] * 3
