"""Definition mistakes in an operator script run as a CLI: one ``Error:`` line naming the
script line, exit status 1, no traceback; the user's own bugs keep their traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cloudcoil_sync.application import Application

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
    ],
    ids=["controller", "async-handler", "route"],
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
