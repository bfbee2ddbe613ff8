"""docker/: the image runs the widget operator the way the generated Deployment expects.

``docker build`` is not possible here, so the Dockerfile is read: base image, non-root numeric
user, what it copies, and an entry point that, followed by the Deployment's ``args``, is the
operator's ``run`` command. The demo script is checked for syntax and for what it needs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from example_harness import PEM_CA, ROOT, load

DOCKER = ROOT / "docker"


def instructions() -> list[tuple[str, str]]:
    text = (DOCKER / "Dockerfile").read_text().replace("\\\n", " ")
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


def test_dockerfile_base_user_and_sources() -> None:
    steps = instructions()
    assert steps[0] == ("FROM", "python:3.11-slim")
    (user,) = [rest for keyword, rest in steps if keyword == "USER"]
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0  # runAsNonRoot needs a numeric non-root UID
    copies = [rest.split() for keyword, rest in steps if keyword == "COPY"]
    for *sources, _target in copies:
        for source in sources:
            assert (ROOT / source).exists(), source
    assert ["examples/widget_operator.py", "/app/widget_operator.py"] in copies
    assert any(k == "RUN" and "pip install ." in rest for k, rest in steps)


def test_entry_point_plus_deployment_args_runs_the_operator() -> None:
    (entry,) = [json.loads(rest) for keyword, rest in instructions() if keyword == "ENTRYPOINT"]
    assert entry == ["python", "/app/widget_operator.py"]
    app = load("widget_operator").app
    docs = app.manifests(image="widgets:local", ca_bundle=PEM_CA)
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert "command" not in container  # the image's entry point is used
    assert [*entry, *container["args"]] == ["python", "/app/widget_operator.py", "run"]
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    # --command spells the same entry point explicitly.
    explicit = app.manifests(image="widgets:local", command=entry, ca_bundle=PEM_CA)
    (deployment,) = [d for d in explicit if d["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["command"] == entry


def test_build_context_keeps_what_the_dockerfile_copies() -> None:
    ignore = (DOCKER / "Dockerfile.dockerignore").read_text().splitlines()
    assert ignore[ignore.index("*") + 1 :][:5] == [
        "!pyproject.toml",
        "!setup.cfg",
        "!README.md",
        "!cloudcoil_sync/**",
        "!examples/widget_operator.py",
    ]


def test_demo_script_is_valid_bash_and_states_its_needs() -> None:
    script = DOCKER / "demo.sh"
    assert script.stat().st_mode & 0o111
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    for needed in (
        "kubectl",
        "openssl",
        "widgets-tls",
        "--ca-file",
        "--image",
        "widgets.${NAMESPACE}.svc",
    ):
        assert needed in text


@pytest.mark.skipif(
    shutil.which("shellcheck") is None,
    reason="SHELLCHECK NOT FOUND ON PATH: docker/demo.sh was not linted",
)
def test_demo_script_passes_shellcheck() -> None:
    subprocess.run(["shellcheck", str(DOCKER / "demo.sh")], check=True)


def test_demo_script_stops_early_without_a_cluster(tmp_path: Path) -> None:
    """Without kubectl on PATH it says what it needs and changes nothing."""
    done = subprocess.run(
        [shutil.which("bash") or "/bin/bash", str(DOCKER / "demo.sh")],
        cwd=ROOT,
        env={"PATH": str(tmp_path), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 1
    assert "demo.sh needs kubectl" in done.stderr
