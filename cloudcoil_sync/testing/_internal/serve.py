"""``python -m cloudcoil_sync.testing serve``: the emulator as a cluster for kubectl and the CLI.

Serves one :class:`~cloudcoil_sync.testing.Emulator` over HTTPS on loopback until SIGINT or
SIGTERM, writes an admin kubeconfig for it, and optionally loads and saves its state. Also the
``cloudcoil-emulator`` console script.
"""

from __future__ import annotations

import base64
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Sequence
from types import FrameType
from typing import Any

import click
import yaml

from cloudcoil_sync._compat.click import ParamType
from cloudcoil_sync._internal.signals import wait_event
from cloudcoil_sync.testing._internal.emulator import Emulator
from cloudcoil_sync.testing._internal.rollout import RolloutMode
from cloudcoil_sync.testing._internal.state import StateError

__all__ = ["cli", "kubeconfig", "main", "write_kubeconfig"]

CONTEXT = "cloudcoil-emulator"
LOOPBACK = ("127.0.0.1", "localhost")
# Where serve writes its admin kubeconfig and where token reads it.
DEFAULT_KUBECONFIG = "emulator.kubeconfig"


def kubeconfig(
    emulator: Emulator, namespace: str = "default", token: str | None = None
) -> dict[str, Any]:
    """A kubeconfig (as data) for ``emulator``: its CA, the admin token unless ``token``."""
    cluster: dict[str, Any] = {"server": emulator.url}
    if emulator.ca_pem:
        cluster["certificate-authority-data"] = base64.b64encode(emulator.ca_pem).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": cluster}],
        "users": [{"name": CONTEXT, "user": {"token": token or emulator.admin_token}}],
        "contexts": [
            {
                "name": CONTEXT,
                "context": {"cluster": CONTEXT, "user": CONTEXT, "namespace": namespace},
            }
        ],
        "current-context": CONTEXT,
    }


def write_kubeconfig(path: str, config: dict[str, Any]) -> None:
    """Write ``config`` to ``path`` atomically, readable by its owner only (it holds a token)."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".kubeconfig-", dir=folder)
    try:
        with os.fdopen(fd, "w") as stream:
            yaml.safe_dump(config, stream, sort_keys=False)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


class _Deployments(ParamType):
    """``available``, ``progressing`` (never available), ``off`` or a delay in seconds."""

    name = "available|progressing|off|SECONDS"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value in ("available", "off"):
            return value
        if value == "progressing":
            return "never"
        try:
            seconds = float(value)
        except ValueError:
            self.fail(f"{value!r} is not available, progressing, off or a number of seconds")
        if not seconds >= 0 or seconds == float("inf"):
            self.fail(f"{value!r}: a delay must be a finite number of seconds >= 0")
        return seconds


class _Route(ParamType):
    """``NAMESPACE/SERVICE=HOST:PORT``: where admission calls for a Service go."""

    name = "NAMESPACE/SERVICE=HOST:PORT"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, tuple):
            return value
        service, _, address = value.partition("=")
        namespace, _, name = service.partition("/")
        host, _, port = address.rpartition(":")
        if not (namespace and name and host and port.isdigit() and 0 < int(port) < 65536):
            self.fail(f"{value!r} is not NAMESPACE/SERVICE=HOST:PORT", param, ctx)
        return namespace, name, host, int(port)


def _stop_on_signals(stop: threading.Event) -> dict[int, Any]:
    def handle(signum: int, frame: FrameType | None) -> None:
        stop.set()

    return {s: signal.signal(s, handle) for s in (signal.SIGINT, signal.SIGTERM)}


@click.group(help="The cloudcoil_sync Kubernetes API emulator.")
def cli() -> None:
    pass


@cli.command(help="Serve the emulator on loopback HTTPS until SIGINT/SIGTERM.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="TCP port (0: any free port).",
)
@click.option(
    "--host",
    type=click.Choice(LOOPBACK),
    default="127.0.0.1",
    show_default=True,
    help="Loopback address to listen on (the admin token is in the kubeconfig).",
)
@click.option(
    "--kubeconfig",
    "kubeconfig_path",
    type=click.Path(dir_okay=False),
    default=DEFAULT_KUBECONFIG,
    show_default=True,
    help="Where to write the admin kubeconfig (rewritten at every start).",
)
@click.option(
    "--namespace",
    default="default",
    show_default=True,
    help="Namespace of the kubeconfig's context.",
)
@click.option(
    "--state",
    type=click.Path(dir_okay=False),
    help="Load objects and tokens from this file if it exists; save them on exit.",
)
@click.option(
    "--deployments",
    type=_Deployments(),
    default="available",
    show_default=True,
    help="Deployment rollout simulator: available, progressing (never available), "
    "off, or seconds until available.",
)
@click.option(
    "--route",
    "routes",
    type=_Route(),
    multiple=True,
    help="Send admission calls for a webhook Service to a local server (repeatable).",
)
def serve(
    port: int,
    host: str,
    kubeconfig_path: str,
    namespace: str,
    state: str | None,
    deployments: RolloutMode | str,
    routes: Sequence[tuple[str, str, str, int]],
) -> None:
    options: dict[str, Any] = {"host": host}
    if port:  # else any free port, or the saved one
        options["port"] = port
    if deployments != "off":
        options["deployments"] = deployments
    try:
        if state and os.path.exists(state):
            emulator = Emulator.from_state(state, **options)
        else:
            emulator = Emulator(**options)
    except StateError as exc:
        raise click.ClickException(str(exc)) from None
    for namespace_, name, route_host, route_port in routes:
        emulator.route_service(namespace_, name, route_host, route_port)
    stop = threading.Event()
    previous = _stop_on_signals(stop)
    try:
        try:
            emulator.start()
        except OSError as exc:
            raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror}") from None
        try:
            write_kubeconfig(kubeconfig_path, kubeconfig(emulator, namespace))
            path = os.path.abspath(kubeconfig_path)
            click.echo(f"Serving the Kubernetes API emulator on {emulator.url}", err=True)
            click.echo(f"Admin kubeconfig: {path}  (export KUBECONFIG={path})", err=True)
            wait_event(stop)  # in slices: a signal must wake the main thread
            click.echo("Stopping", err=True)
        finally:
            emulator.stop()
            if state:
                _save(emulator, state)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _save(emulator: Emulator, path: str) -> None:
    try:
        skipped = emulator.save_state(path)
    except OSError as exc:
        raise click.ClickException(f"cannot save the state to {path}: {exc.strerror}") from None
    for what in skipped:
        click.echo(f"Not saved (no JSON form): {what}", err=True)
    click.echo(f"State saved to {os.path.abspath(path)}", err=True)


@cli.command(help="Mint a token for a ServiceAccount (TokenRequest) and print it or a kubeconfig.")
@click.argument("service_account")
@click.option("--namespace", "-n", default="default", show_default=True)
@click.option(
    "--kubeconfig",
    "kubeconfig_path",
    type=click.Path(dir_okay=False),
    help=f"The admin kubeconfig that serve wrote [default: the first file of $KUBECONFIG, "
    f"else {DEFAULT_KUBECONFIG}].",
)
@click.option(
    "--write-kubeconfig",
    "output",
    type=click.Path(dir_okay=False),
    help="Write a kubeconfig for the ServiceAccount here instead of printing the token.",
)
def token(
    service_account: str, namespace: str, kubeconfig_path: str | None, output: str | None
) -> None:
    from cloudcoil_sync.client import ClientError, Config

    kubeconfig_path = kubeconfig_path or _environment_kubeconfig()
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token"
    try:
        with Config.from_kubeconfig(kubeconfig_path) as config:
            minted = config.transport.request_json("POST", path, body=body)["status"]["token"]
    except ClientError as exc:
        raise click.ClickException(str(exc)) from None
    if output is None:
        click.echo(minted)
        return
    with open(kubeconfig_path) as stream:
        admin = yaml.safe_load(stream)
    admin["users"] = [{"name": CONTEXT, "user": {"token": minted}}]
    for context in admin.get("contexts") or []:
        context["context"]["namespace"] = namespace
    write_kubeconfig(output, admin)


def _environment_kubeconfig() -> str:
    """The first existing file of ``$KUBECONFIG`` (as kubectl's first in its merge order),
    else its first entry, else serve's default."""
    entries = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    existing = [p for p in entries if os.path.isfile(p)]
    return (existing or entries or [DEFAULT_KUBECONFIG])[0]


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``python -m cloudcoil_sync.testing`` and ``cloudcoil-emulator``."""
    try:
        cli.main(args=None if argv is None else list(argv), standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else "", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        click.echo(f"Error: {' '.join(exc.format_message().split())}", err=True)
        sys.exit(exc.exit_code)
    except click.Abort:
        sys.exit(1)
