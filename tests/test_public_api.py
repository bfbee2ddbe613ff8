"""The public API changes only on purpose: every public ``__all__`` matches its snapshot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import public_api
from public_api import SNAPSHOT, public_modules, public_names


def test_public_all_matches_the_snapshot() -> None:
    recorded = SNAPSHOT.read_text().split()
    current = public_names()
    added = sorted(set(current) - set(recorded))
    removed = sorted(set(recorded) - set(current))
    assert not (added or removed), (
        f"public API changed: added {added}, removed {removed}; if on purpose, run "
        "`.venv/bin/python tests/public_api.py --write` and commit tests/public_api.txt"
    )
    assert recorded == sorted(recorded)


def test_the_snapshot_covers_every_package() -> None:
    packages = {m.__name__ for m in public_modules() if hasattr(m, "__path__")}
    assert {"cloudcoil_sync", "cloudcoil_sync.client", "cloudcoil_sync.testing"} <= packages
    prefixes = {name.rsplit(".", 1)[0] for name in SNAPSHOT.read_text().split()}
    assert packages <= prefixes  # each public package exports something


def test_the_writer_refuses_a_call_without_write() -> None:
    done = subprocess.run(
        [sys.executable, str(SNAPSHOT.with_name("public_api.py"))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == "usage: python tests/public_api.py --write"


def test_every_public_package_is_a_facade_over_its_internal_package() -> None:
    """Implementation lives under ``_internal``; a public package holds only its facade."""
    root = Path(public_api.__file__).resolve().parent.parent / "cloudcoil_sync"
    facades = {"__init__.py", "__main__.py", "py.typed"}
    public = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith("_")]
    assert {p.name for p in public} >= {"application", "controller", "admission", "client"}
    outside = sorted(
        str(path.relative_to(root))
        for package in [root, *public]
        for path in package.iterdir()
        if path.is_file() and path.suffix == ".py" and path.name not in facades
    )
    assert not outside, f"implementation modules outside an _internal package: {outside}"
    for package in public:
        assert (package / "_internal" / "__init__.py").is_file(), package
