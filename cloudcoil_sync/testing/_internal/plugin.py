"""pytest plugin (registered through the ``pytest11`` entry point ``cloudcoil_sync``).

Fixtures:

- ``kube_emulator``: a started :class:`~cloudcoil_sync.testing.Emulator` (HTTPS, the rollout
  simulator on with ``deployments="available"`` as ``serve`` has it), one per test.
- ``kube_config``: a ``cloudcoil_sync.client.Config`` for it (admin token, namespace default).
- ``kube_operator``: ``kube_operator(app)`` installs an ``Application`` into the emulator and
  runs it as its generated ServiceAccount, webhooks served over TLS on loopback; after the
  test it is stopped, and the test fails if the operator was refused anything (each 403
  listed with its verb and resource). ``@pytest.mark.kube_operator(admin=True)`` runs it
  with the admin token instead.

Emulator options per test: ``@pytest.mark.kube_emulator(tls=False, history_size=100, ...)``
(keyword arguments of :class:`~cloudcoil_sync.testing.Emulator`).

``--cloudcoil-rbac-report`` prints, after the session, the permissions each operator's
generated RBAC grants that none of its requests needed; under pytest-xdist each worker sends
what it saw to the controller, which merges them into one report.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from cloudcoil_sync.testing._internal.emulator import Emulator
from cloudcoil_sync.testing._internal.operator import OperatorRunner, RBACUsage

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config

__all__ = ["kube_config", "kube_emulator", "kube_operator"]

_USAGE = pytest.StashKey[RBACUsage]()
_WORKER_KEY = "cloudcoil_sync_rbac_usage"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("cloudcoil_sync").addoption(
        "--cloudcoil-rbac-report",
        action="store_true",
        default=False,
        help="after the session, list the permissions each operator run by kube_operator was "
        "granted by its generated RBAC but never used",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "kube_emulator(**options): options for the kube_emulator fixture's Emulator"
    )
    config.addinivalue_line(
        "markers", "kube_operator(admin=False): run kube_operator's operators as the admin"
    )
    if config.getoption("cloudcoil_rbac_report", default=False):
        config.stash[_USAGE] = RBACUsage()


def pytest_sessionfinish(session: pytest.Session) -> None:
    usage = session.config.stash.get(_USAGE, None)
    output = getattr(session.config, "workeroutput", None)  # set on a pytest-xdist worker
    if usage is not None and isinstance(output, dict):
        output[_WORKER_KEY] = usage.dump()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist's controller: a worker finished; merge the usage it saw."""
    usage = node.config.stash.get(_USAGE, None)
    dumped = (getattr(node, "workeroutput", None) or {}).get(_WORKER_KEY)
    if usage is not None and isinstance(dumped, dict):
        usage.merge(dumped)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    usage = config.stash.get(_USAGE, None)
    if usage is None or hasattr(config, "workerinput"):  # a worker: the controller reports
        return
    terminalreporter.section("cloudcoil_sync RBAC report")
    for line in usage.report() or ["no operator was run by the kube_operator fixture"]:
        terminalreporter.write_line(line)


@pytest.fixture
def kube_emulator(request: pytest.FixtureRequest) -> Iterator[Emulator]:
    """A Kubernetes API emulator over HTTPS on loopback, stopped after the test."""
    marker = request.node.get_closest_marker("kube_emulator")
    options: dict[str, Any] = {"deployments": "available"}
    options.update(marker.kwargs if marker else {})
    with Emulator(**options) as emulator:
        yield emulator


@pytest.fixture
def kube_config(kube_emulator: Emulator) -> Iterator[Config]:
    """Client configuration for ``kube_emulator`` (admin token, namespace ``default``).

    Its connection pool is closed after the test.
    """
    config = kube_emulator.config()
    yield config
    config.close()


@pytest.fixture
def kube_operator(
    request: pytest.FixtureRequest, kube_emulator: Emulator, tmp_path: Path
) -> Iterator[OperatorRunner]:
    """``kube_operator(app)``: install and run ``app`` as its generated ServiceAccount."""
    marker = request.node.get_closest_marker("kube_operator")
    admin = bool(marker.kwargs.get("admin", False)) if marker else False
    usage = request.config.stash.get(_USAGE, None)
    runner = OperatorRunner(kube_emulator, tmp_path, admin=admin, usage=usage)
    yield runner
    runner.close()
