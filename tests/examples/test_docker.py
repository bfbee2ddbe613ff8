"""docker/: the image runs the widget operator the way the generated Deployment expects.

No image is built here (docker/e2e-node.sh builds and runs it on a real node), so the
Dockerfile is linted by reading it: a BASE build argument, a runtime stage that runs nothing
(a distroless base has no shell), a numeric non-root user and no user or group created (Debian's
base-passwd already has a group ``operator``), sources that exist and pass the
.dockerignore, and an entry point that, followed by the Deployment's ``args``, is the
operator's ``run`` command. ``make image`` picks docker, podman or buildah. The scripts are
checked for syntax and, when shellcheck is installed, linted.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from example_harness import PEM_CA, ROOT, load

DOCKER = ROOT / "docker"
_VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


@dataclass
class Stage:
    base: str
    name: str | None
    steps: list[tuple[str, str]] = field(default_factory=list)

    def args(self, keyword: str) -> list[str]:
        return [rest for k, rest in self.steps if k == keyword]


def instructions(text: str) -> list[tuple[str, str]]:
    """(KEYWORD, arguments) per instruction: continuations joined, comments dropped."""
    lines = [line for line in text.splitlines() if not line.strip().startswith("#")]
    found = []
    for line in "\n".join(lines).replace("\\\n", " ").splitlines():
        if line.strip():
            keyword, _, rest = line.strip().partition(" ")
            found.append((keyword.upper(), " ".join(rest.split())))
    return found


def parse(text: str) -> tuple[dict[str, str | None], list[Stage]]:
    """Global ARGs (name: default) and the build stages."""
    global_args: dict[str, str | None] = {}
    stages: list[Stage] = []
    for keyword, rest in instructions(text):
        if keyword == "FROM":
            parts = rest.split()
            name = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None
            assert len(parts) in (1, 3), f"FROM {rest}: image [AS name] expected"
            stages.append(Stage(parts[0], name))
        elif not stages:
            assert keyword == "ARG", f"only ARG may come before the first FROM, not {keyword}"
            arg, sep, default = rest.partition("=")
            global_args[arg] = default if sep else None
        else:
            stages[-1].steps.append((keyword, rest))
    return global_args, stages


def resolve(value: str, args: dict[str, str | None]) -> str:
    def one(match: re.Match[str]) -> str:
        default = args.get(match.group(1))
        assert default is not None, f"{match.group(0)} has no default"
        return resolve(default, args)

    return _VARIABLE.sub(one, value)


DOCKERFILE = (DOCKER / "Dockerfile").read_text()


def test_base_is_a_build_argument_with_a_pinned_default() -> None:
    args, stages = parse(DOCKERFILE)
    assert args["BASE"] == "python:3.11-slim"
    for stage in stages:  # every base comes from an argument: BASE or BUILDER (default BASE)
        assert _VARIABLE.fullmatch(stage.base), stage.base
        image = resolve(stage.base, args)
        assert image == "python:3.11-slim"
        assert ":" in image and not image.endswith(":latest")
    assert stages[-1].base == "${BASE}"


def test_the_runtime_stage_runs_nothing_and_creates_no_user() -> None:
    """Distroless bases have no shell; Debian ones a group "operator" already (gid 37)."""
    _, stages = parse(DOCKERFILE)
    runtime = stages[-1]
    assert not runtime.args("RUN") and not runtime.args("SHELL")
    for stage in stages:
        for command in stage.args("RUN"):
            assert not re.search(r"\b(useradd|groupadd|adduser|addgroup)\b", command), command
    (user,) = runtime.args("USER")
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and gid.isdigit(), user  # runAsNonRoot needs a numeric user
    assert int(uid) != 0 and int(gid) != 0
    assert not any(keyword == "ADD" for stage in stages for keyword, _ in stage.steps)


def test_sources_exist_and_pass_the_dockerignore() -> None:
    _, stages = parse(DOCKERFILE)
    names = [stage.name for stage in stages]
    ignore = [
        line
        for line in (DOCKER / "Dockerfile.dockerignore").read_text().splitlines()
        if line and not line.startswith("#")
    ]

    def sent(path: str) -> bool:  # BuildKit's rule: the last matching pattern decides
        keep = True
        for pattern in ignore:
            negated = pattern.startswith("!")
            pattern = pattern.lstrip("!")
            if fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(path, pattern.rstrip("*/")):
                keep = negated
        return keep

    copied = []
    for index, stage in enumerate(stages):
        for rest in stage.args("COPY"):
            flags = [word for word in rest.split() if word.startswith("--")]
            *sources, _target = [word for word in rest.split() if not word.startswith("--")]
            if flags:
                assert flags[0].startswith("--from="), flags
                assert flags[0].removeprefix("--from=") in names[:index]  # an earlier stage
                continue
            for source in sources:
                assert (ROOT / source).exists(), source
                assert sent(source), f"{source} is excluded by Dockerfile.dockerignore"
                copied.append(source)
    assert {"pyproject.toml", "cloudcoil_sync", "examples/widget_operator.py"} <= set(copied)


def test_the_packages_land_where_the_runtime_imports_them() -> None:
    _, stages = parse(DOCKERFILE)
    (install,) = [run for run in stages[0].args("RUN") if "pip install" in run]
    target = re.search(r"--target (\S+)", install)
    assert target is not None and "--no-cache-dir" in install
    # pip's CA bundle, when given, is a build secret: mounted for this step only
    assert install.startswith("--mount=type=secret,id=pip-cert ")
    runtime = stages[-1]
    assert f"--from=build {target.group(1)} {target.group(1)}" in runtime.args("COPY")
    env = " ".join(runtime.args("ENV"))
    assert f"PYTHONPATH={target.group(1)}" in env.split()
    assert "PYTHONUNBUFFERED=1" in env.split()  # logs reach `kubectl logs` at once


#: What Debian's base-passwd puts there (python:3.11-slim and the kit's base): a group named
#: operator, gid 37, which broke `useradd --user-group operator`.
DEBIAN_PASSWD = (
    "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
)
DEBIAN_GROUP = "root:x:0:\noperator:x:37:\nnogroup:x:65534:\n"


def run_user_step(tmp_path: Path, passwd: str, group: str) -> subprocess.CompletedProcess[str]:
    """The build stage's passwd/group step, run with sh on copies of a base's files."""
    _, stages = parse(DOCKERFILE)
    (step,) = [run for run in stages[0].args("RUN") if "/etc/passwd" in run]
    etc, out = tmp_path / "etc", tmp_path / "out"
    etc.mkdir()
    (etc / "passwd").write_text(passwd)
    (etc / "group").write_text(group)
    script = (
        step.replace("/opt/etc", "@OUT@").replace("/etc/", f"{etc}/").replace("@OUT@", str(out))
    )
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30)


def test_the_user_gets_passwd_and_group_entries_without_useradd(tmp_path: Path) -> None:
    """A uid without a passwd entry runs with gid 0 (the kubelet passes the runtime the uid
    alone): the image carries the builder's passwd and group with user and group 10001."""
    done = run_user_step(tmp_path, DEBIAN_PASSWD, DEBIAN_GROUP)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    entry = "cloudcoil:x:10001:10001:cloudcoil operator:/nonexistent:/usr/sbin/nologin\n"
    assert (out / "passwd").read_text() == DEBIAN_PASSWD + entry
    assert (out / "group").read_text() == DEBIAN_GROUP + "cloudcoil:x:10001:\n"
    _, stages = parse(DOCKERFILE)
    assert "--from=build /opt/etc/passwd /opt/etc/group /etc/" in stages[-1].args("COPY")
    assert stages[-1].args("USER") == ["10001:10001"]


def test_a_taken_id_or_name_stops_the_build(tmp_path: Path) -> None:
    for n, (passwd, group) in enumerate(
        [
            (DEBIAN_PASSWD, DEBIAN_GROUP + "builders:x:10001:\n"),
            (DEBIAN_PASSWD + "cloudcoil:x:999:999::/:/bin/sh\n", DEBIAN_GROUP),
        ]
    ):
        where = tmp_path / str(n)
        where.mkdir()
        done = run_user_step(where, passwd, group)
        assert done.returncode == 1
        assert "cloudcoil or 10001 is taken in" in done.stderr


def test_entry_point_plus_deployment_args_runs_the_operator() -> None:
    _, stages = parse(DOCKERFILE)
    (entry,) = [json.loads(rest) for rest in stages[-1].args("ENTRYPOINT")]
    assert entry == ["python3", "/app/widget_operator.py"]  # exec form; python3: distroless too
    assert "examples/widget_operator.py /app/widget_operator.py" in stages[-1].args("COPY")
    app = load("widget_operator").app
    docs = app.manifests(image="widgets:local", ca_bundle=PEM_CA)
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert "command" not in container  # the image's entry point is used
    assert [*entry, *container["args"]] == ["python3", "/app/widget_operator.py", "run"]
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    # --command spells the same entry point explicitly.
    explicit = app.manifests(image="widgets:local", command=entry, ca_bundle=PEM_CA)
    (deployment,) = [d for d in explicit if d["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["command"] == entry


def test_the_linter_catches_the_mistakes_it_is_for() -> None:
    """The checks above fail on the Dockerfile that broke on Debian bases."""
    broken = """FROM python:3.11-slim
RUN useradd --uid 10001 --user-group operator
USER operator
ENTRYPOINT python app.py
"""
    args, stages = parse(broken)
    assert "BASE" not in args
    assert stages[-1].args("RUN")
    assert not stages[-1].args("USER")[0].partition(":")[0].isdigit()
    with pytest.raises(json.JSONDecodeError):
        json.loads(stages[-1].args("ENTRYPOINT")[0])
    with pytest.raises(AssertionError, match="only ARG"):
        parse("ENV A=1\nFROM x\n")


def _fake_engines(tmp_path: Path, *names: str) -> dict[str, str]:
    """A PATH with recording stand-ins for the named engines (and make's own tools)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("make", "sh", "test"):
        real = shutil.which(tool)
        assert real is not None
        (bin_dir / tool).symlink_to(real)
    for name in names:
        script = bin_dir / name
        record = f'echo "{name} $*" >> {tmp_path}/ran'
        script.write_text(f'#!/bin/sh\n[ "$1" = info ] && exit 1\n{record}\n')
        script.chmod(0o755)
    return {"PATH": str(bin_dir), "HOME": str(tmp_path)}


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize(
    ("engines", "expected"),
    [
        (("docker", "podman", "buildah"), "podman build"),  # docker without a daemon: skipped
        (("buildah",), "buildah build-using-dockerfile"),
    ],
)
def test_make_image_uses_the_engine_that_is_here(
    tmp_path: Path, engines: tuple[str, ...], expected: str
) -> None:
    env = _fake_engines(tmp_path, *engines)
    env["PIP_CERT"] = "/etc/proxy-ca.pem"
    done = subprocess.run(
        ["make", "-s", "image", "IMAGE=example/widgets:v2", "BASE=kube-node/python:3.11"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    (ran,) = (tmp_path / "ran").read_text().splitlines()
    assert ran.startswith(f"{expected} --network=host --build-arg BASE=kube-node/python:3.11")
    assert "--secret id=pip-cert,src=/etc/proxy-ca.pem" in ran
    assert "--ignorefile docker/Dockerfile.dockerignore" in ran
    assert ran.endswith("-f docker/Dockerfile -t example/widgets:v2 .")


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_image_without_an_engine_says_so(tmp_path: Path) -> None:
    done = subprocess.run(
        ["make", "-s", "image"],
        cwd=ROOT,
        env=_fake_engines(tmp_path),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode != 0
    assert "make image needs docker (with a daemon), podman or buildah" in done.stderr


def test_build_context_keeps_what_the_dockerfile_copies() -> None:
    ignore = (DOCKER / "Dockerfile.dockerignore").read_text().splitlines()
    assert ignore[ignore.index("*") + 1 :][:5] == [
        "!pyproject.toml",
        "!setup.cfg",
        "!README.md",
        "!cloudcoil_sync/**",
        "!examples/widget_operator.py",
    ]


SCRIPTS = sorted(DOCKER.glob("*.sh"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_scripts_are_executable_valid_bash(script: Path) -> None:
    assert script.stat().st_mode & 0o111
    subprocess.run(["bash", "-n", str(script)], check=True)


def test_demo_script_states_its_needs() -> None:
    text = (DOCKER / "demo.sh").read_text()
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
    reason="SHELLCHECK NOT FOUND ON PATH: docker/*.sh were not linted (apt-get install shellcheck)",
)
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_scripts_pass_shellcheck(script: Path) -> None:
    done = subprocess.run(["shellcheck", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


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
