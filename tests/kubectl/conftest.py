"""kubectl (the machine image's, 1.32) against the emulator; skipped only if kubectl is absent."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cloudcoil_sync.testing import Emulator
from cloudcoil_sync.testing._internal.serve import kubeconfig, write_kubeconfig

KUBECTL = shutil.which("kubectl")
Kubectl = Callable[..., subprocess.CompletedProcess[str]]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if KUBECTL is not None:
        return
    reason = "KUBECTL NOT FOUND ON PATH: the kubectl compatibility tests did not run"
    for item in items:
        if "tests/kubectl" in str(item.path):
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def kubectl_argv(kube_emulator: Emulator, tmp_path: Path) -> list[str]:
    """``kubectl --kubeconfig <a kubeconfig for the emulator>``."""
    assert KUBECTL is not None
    path = tmp_path / "kubeconfig"
    write_kubeconfig(str(path), kubeconfig(kube_emulator))
    return [KUBECTL, "--kubeconfig", str(path)]


@pytest.fixture
def kubectl(kubectl_argv: list[str], tmp_path: Path) -> Iterator[Kubectl]:
    """Run kubectl against the emulator; returns the completed process."""

    def run(
        *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [*kubectl_argv, *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=60,
            env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},  # its cache stays here
        )
        if check:
            assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done

    yield run
