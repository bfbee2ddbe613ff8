"""Every code block of the guide pages runs.

- ``python`` blocks of a page run in order in one namespace; functions named ``test_*`` they
  define are then called with the pytest fixtures they name (``kube_emulator``...).
- ``diff`` blocks: the new side (context and ``+`` lines) runs as Python.
- ``sh`` blocks: ``python <example> <command> <flags>`` lines are parsed by that example's
  click command line (commands and flags must exist); ``make`` targets must exist in the
  Makefile; other programs must be ones the guide is allowed to name.
- ``console`` blocks: their ``$ `` lines are checked as ``sh`` lines (a recorded session).
- ``python -m cloudcoil_sync.testing <command> <flags>`` is parsed by the emulator's command line.
- ``yaml`` blocks parse.
"""

from __future__ import annotations

import inspect
import os
import re
import shlex
import sys
import types
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from example_harness import ROOT, load

from cloudcoil_sync.application._internal.cli import build_cli
from cloudcoil_sync.testing._internal.serve import cli as emulator_cli

DOCS = ROOT / "docs"
GUIDE = ["index.md", "guide.md", "concepts.md", "cli.md", "rbac.md", "testing.md"]
GUIDE += ["deployment.md", "migration.md", "troubleshooting.md"]
PAGES = ["README.md", *(f"docs/{page}" for page in GUIDE)]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
PROGRAMS = {"kubectl", "openssl", "docker", "kind", "pip", "export", "cd", "bash", "curl", "kill"}
PROGRAMS |= {"pytest"}


def blocks(page: str) -> list[tuple[str, str]]:
    """(language, code) of each fenced block; a bare fence is a shell block."""
    text = (ROOT / page).read_text()
    return [(m.group(1) or "sh", m.group(2)) for m in FENCE.finditer(text)]


def test_every_page_is_linked_from_the_index() -> None:
    index = (DOCS / "index.md").read_text()
    for page in GUIDE[1:]:
        assert f"({page})" in index, page


def test_every_block_has_a_checked_language() -> None:
    for page in PAGES:
        for language, _ in blocks(page):
            assert language in ("python", "diff", "sh", "yaml", "console"), (page, language)


@pytest.mark.parametrize("page", PAGES)
def test_python_blocks_run(
    page: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("CLOUDCOIL_NAMESPACE", raising=False)
    monkeypatch.chdir(tmp_path)
    # A real module: pydantic resolves a model's annotations in its module's namespace.
    module = types.ModuleType(f"docs_{Path(page).stem}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace: dict[str, Any] = module.__dict__
    ran = 0
    for language, code in blocks(page):
        if language == "diff":
            code = "".join(
                line[1:] + "\n" for line in code.splitlines() if line[:1] in (" ", "+", "")
            )
        elif language != "python":
            continue
        exec(compile(code, f"{page}:block{ran}", "exec"), namespace)
        ran += 1
    for name, function in list(namespace.items()):
        if name.startswith("test_") and callable(function):
            arguments = {
                parameter: request.getfixturevalue(parameter)
                for parameter in inspect.signature(function).parameters
            }
            function(**arguments)
    assert ran or blocks(page), f"{page} has no code blocks"


def _command(argv: list[str]) -> None:
    """Parse (never run) ``python <example> <command> ...`` with the example's click CLI."""
    script = argv[1]
    assert script.startswith("examples/") and (ROOT / script).is_file(), script
    module = load(Path(script).stem)
    group = build_cli(module.app)
    with click.Context(group, info_name="operator") as parent:
        command = group.get_command(parent, argv[2])
        assert command is not None, argv
        command.make_context(argv[2], argv[3:], parent=parent).close()


def _emulator_command(argv: list[str]) -> None:
    """Parse (never run) ``cloudcoil_sync.testing <command> ...``."""
    with click.Context(emulator_cli, info_name="emulator") as parent:
        command = emulator_cli.get_command(parent, argv[0])
        assert command is not None, argv
        command.make_context(argv[0], argv[1:], parent=parent).close()


def _shell_lines(language: str, code: str) -> list[str]:
    if language == "console":
        return [line[2:].rstrip(" &") for line in code.splitlines() if line.startswith("$ ")]
    return code.replace("\\\n", " ").splitlines()


@pytest.mark.parametrize("page", PAGES)
def test_shell_blocks_name_real_commands_and_flags(page: str) -> None:
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z]+):", makefile, re.M))
    for language, code in blocks(page):
        if language == "yaml":
            assert list(yaml.safe_load_all(code))
            continue
        if language not in ("sh", "console"):
            continue
        for line in _shell_lines(language, code):
            line = line.split(" #", 1)[0].strip()
            if not line or line.startswith("#"):
                continue
            argv = shlex.split(line.split(" > ", 1)[0].split(" | ", 1)[0])
            while argv and re.fullmatch(r"[A-Z_]+=\S*", argv[0]):
                argv.pop(0)
            if argv[0] == "make":
                variables = {a.split("=", 1)[0] for a in argv[1:] if "=" in a}
                assert {a for a in argv[1:] if "=" not in a} <= targets, line
                assert all(f"$({v})" in makefile for v in variables), line
            elif argv[0] in ("python", ".venv/bin/python") and argv[1:2] == ["-m"]:
                assert argv[2] in ("pytest", "cloudcoil_sync.testing"), line
                if argv[2] == "cloudcoil_sync.testing":
                    _emulator_command(argv[3:])
            elif argv[0] in ("python", ".venv/bin/python"):
                try:
                    _command(argv)
                except click.exceptions.UsageError as error:
                    pytest.fail(f"{page}: {line}: {error}")
            else:
                assert argv[0] in PROGRAMS or os.path.exists(ROOT / argv[0]), line
