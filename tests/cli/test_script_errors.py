"""Definition mistakes in an operator script run as a CLI: one ``Error:`` line naming the
script line, exit status 1, no traceback; the user's own bugs keep their traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.application import Application
from cloudcoil_sync.controller import Controller, HealthServer, LeaderElection

HEADER = """\
from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from cloudcoil_sync.application import Application
"""
FOOTER = """
if __name__ == "__main__":
    app.main()
"""


def run(tmp_path: Path, body: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "op.py"
    script.write_text(HEADER + textwrap.dedent(body) + FOOTER)
    return subprocess.run(
        [sys.executable, "op.py", *(args or ("manifests",))],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **env},
    )


def one_line(done: subprocess.CompletedProcess[str], *texts: str) -> None:
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith("Error: op.py:") and done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr
    for text in texts:
        assert text in done.stderr


def test_a_bad_application_name_is_one_line_naming_the_value_and_the_rule(
    tmp_path: Path,
) -> None:
    done = run(tmp_path, 'app = Application("Bad_Name")\n')
    one_line(done, "op.py:3: Application name must be a Kubernetes DNS label", "'Bad_Name'")
    assert "RFC 1123" in done.stderr and "DNS-1123" in done.stderr


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            'app = Application("ok")\napp.controller(ConfigMap, workers=0)\n',
            "op.py:4: workers must be",
        ),
        (
            """\
            app = Application("ok")
            configs = app.controller(ConfigMap)

            @configs.reconcile()
            async def reconcile(cm):
                return cm
            """,
            "op.py:6: ",
        ),
        (
            """\
            app = Application("ok")
            configs = app.controller(ConfigMap)

            @configs.validate(operations=("PATCH",))
            def check(request):
                pass
            """,
            "op.py:6: operations must contain",
        ),
        (
            """\
            from cloudcoil_sync.controller import Controller
            configs = Controller(ConfigMap)

            @configs.reconcile()
            async def reconcile(cm):
                return cm
            """,
            "op.py:6: ",
        ),
        (
            """\
            from cloudcoil_sync.controller import LeaderElection
            app = Application("ok", leader_election=LeaderElection("Bad_Name"))
            """,
            "op.py:4: Lease name and namespace must be valid Kubernetes DNS names",
        ),
    ],
    ids=["controller", "async-handler", "route", "standalone-controller", "argument"],
)
def test_controller_and_route_mistakes_are_one_line(
    tmp_path: Path, body: str, expected: str
) -> None:
    one_line(run(tmp_path, body), expected)


def test_the_users_own_errors_and_the_opt_out_keep_the_traceback(tmp_path: Path) -> None:
    done = run(tmp_path, 'app = Application("ok")\nraise ValueError("my own bug")\n')
    assert done.returncode == 1 and "Traceback" in done.stderr and "my own bug" in done.stderr
    done = run(tmp_path, 'app = Application("Bad_Name")\n', CLOUDCOIL_TRACEBACK="1")
    assert done.returncode == 1 and "Traceback" in done.stderr
    assert "ValueError: Application name must be a Kubernetes DNS label" in done.stderr


def test_library_use_still_raises_at_once() -> None:
    with pytest.raises(
        ValueError, match=r"^Application name must be a Kubernetes DNS label, got 'Bad_Name'"
    ):
        Application("Bad_Name")


def test_a_mistake_in_a_module_the_script_imports_is_one_line_naming_that_module(
    tmp_path: Path,
) -> None:
    (tmp_path / "ops.py").write_text(HEADER + 'app = Application("Bad_Name")\n')
    one = run(tmp_path, "from ops import app\n")
    assert one.returncode == 1 and one.stderr.count("\n") == 1, one.stderr
    assert one.stderr.startswith("Error: ops.py:3: Application name must be a Kubernetes DNS")


HOOK = "print('default hook:', sys.excepthook is sys.__excepthook__)\n"


def hook_states(tmp_path: Path, script: str) -> list[str]:
    (tmp_path / "check.py").write_text(script)
    done = subprocess.run(
        [sys.executable, "check.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line.startswith("default hook:")]


def test_importing_leaves_sys_excepthook_alone_and_the_cli_installs_it(tmp_path: Path) -> None:
    (tmp_path / "library.py").write_text(
        HEADER + "def build():\n    return Application('ok')\n"  # a library's function
    )
    states = hook_states(
        tmp_path,
        "import sys\n"
        "import cloudcoil_sync, cloudcoil_sync.application, cloudcoil_sync.controller\n"
        "import cloudcoil_sync.admission, cloudcoil_sync.crd, cloudcoil_sync.testing\n"
        + HOOK
        + "import library\napp = library.build()\n"
        + HOOK
        + "try:\n    app.main(['--help'])\nexcept SystemExit:\n    pass\n"
        + HOOK,
    )
    # Imports and a library's definitions leave it alone; the command line installs it.
    assert states == ["default hook: True", "default hook: True", "default hook: False"]


def test_definitions_built_by_other_code_than_the_script_leave_it_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    Application("ok", health=HealthServer(), leader_election=LeaderElection("ok"))
    Controller(ConfigMap)
    assert sys.excepthook is sys.__excepthook__  # built by a test function, not by a script
