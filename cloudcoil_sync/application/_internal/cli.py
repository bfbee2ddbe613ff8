"""The operator's command line (click): ``manifests``, ``install``, ``uninstall``, ``run``,
``certs``.

``Application.main(argv)`` calls :func:`main`. ``manifests`` lives here; every other command
lives in its own module, imported only when that command runs, so ``manifests`` never imports
the runtime (no waitress, no sockets). A command module ``COMMAND_MODULES[name]`` provides
``command(app) -> click.Command``; it can reuse :func:`deployment_options` and
:func:`manifest_options` for the flags it shares with ``manifests`` (they become one
`ManifestOptions`, checked where the library checks it).

Errors are one line on stderr (``Error: ...``), never a traceback for a user mistake:
exit status 2 for bad flags and invocations (including a missing or unreadable CA, and every
`OptionError`, named by its flags), 1 for an invalid operator definition and for runtime
failures (`command_errors`).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import math
import os
import shlex
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TypeVar

import click
from click.core import ParameterSource

from cloudcoil_sync._compat.click import ParamType
from cloudcoil_sync.application._internal.extras_cli import extra_options, extras_from

if TYPE_CHECKING:
    from cloudcoil_sync.application._internal.manifests import Definition
    from cloudcoil_sync.application._internal.options import ManifestOptions, OptionError
    from cloudcoil_sync.application._internal.settings import WebhookServer
    from cloudcoil_sync.client import Config

__all__ = [
    "COMMAND_MODULES",
    "DefinitionError",
    "Operator",
    "build_cli",
    "command_errors",
    "deployment_options",
    "fail",
    "main",
    "manifest_options",
    "operation_options",
    "run_operation",
    "run_options",
]

F = TypeVar("F", bound=Callable[..., Any])

#: Module of each runtime command; it must define ``command(app) -> click.Command``.
COMMAND_MODULES = {
    "install": "cloudcoil_sync.application._internal.install",
    "uninstall": "cloudcoil_sync.application._internal.uninstall",
    "run": "cloudcoil_sync.application._internal.run_cli",
    "certs": "cloudcoil_sync.application._internal.certs_cli",
    "dashboard": "cloudcoil_sync.application._internal.dashboard",
    "migrate": "cloudcoil_sync.application._internal.migrate",
}
CA_ENV = "CLOUDCOIL_WEBHOOK_CA_FILE"
USAGE_EXIT = 2
#: The flag of each `ManifestOptions` keyword.
FLAGS = {
    "image": "--image",
    "command": "--command",
    "replicas": "--replicas",
    "include_webhooks": "--without-webhooks",
    "ca_bundle": "--ca-file",
    "requests": "--requests",
    "limits": "--limits",
    "cert_manager": "--cert-manager",
}


class Operator(Protocol):
    """What the command line uses of an `Application`."""

    name: str
    namespace: str
    config: Config | None

    @property
    def webhook(self) -> WebhookServer | None: ...

    def definition(self) -> Definition: ...

    def validate_definition(self, *, freeze: bool = False) -> None: ...

    def replace_webhook(self, webhook: WebhookServer) -> None: ...

    def run(self, *, stop: threading.Event | None = None) -> None: ...


class DefinitionError(click.ClickException):
    """The operator definition itself is invalid (exit status 1)."""

    exit_code = 1


def usage_error(error: OptionError) -> click.BadParameter:
    """An `OptionError` as click's "Invalid value for --flag: ..." (exit status 2)."""
    flags = [FLAGS[name] for name in error.options if name in FLAGS]
    return click.BadParameter(str(error), param_hint=" / ".join(flags) or None)


@contextlib.contextmanager
def command_errors() -> Iterator[None]:
    """What a command's work raises, as click errors: `OptionError` exit 2; a definition
    error (``ValueError``/``TypeError``) exit 1; an install or API failure exit 1."""
    from cloudcoil_sync.application._internal.options import OptionError
    from cloudcoil_sync.application._internal.progress import InstallError
    from cloudcoil_sync.client import ClientError

    try:
        yield
    except OptionError as error:
        raise usage_error(error) from None
    except (InstallError, ClientError) as error:  # ClientError: no kubeconfig, bad credentials
        raise click.ClickException(str(error)) from None
    except (ValueError, TypeError) as error:
        raise DefinitionError(str(error)) from None


def _one_line(message: str) -> str:
    return " ".join(str(message).split())


def fail(message: str, exit_code: int = 1) -> NoReturn:
    """Print ``Error: <message>`` as one line on stderr and exit."""
    click.echo(f"Error: {_one_line(message)}", err=True)
    sys.exit(exit_code)


class _CommandType(ParamType):
    name = "command"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, list):
            return value
        try:
            parts = shlex.split(value)
        except ValueError as exc:
            self.fail(f"cannot split {value!r}: {exc}", param, ctx)
        if not parts:
            self.fail("must contain a command", param, ctx)
        return parts


class _ResourcesType(ParamType):
    """``cpu=100m,memory=128Mi`` (or ``none``) as a dict."""

    name = "NAME=QUANTITY,..."

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, dict):
            return value
        if value.strip() == "none":
            return {}
        out: dict[str, str] = {}
        for item in value.split(","):
            name, sep, quantity = item.strip().partition("=")
            if not sep or not name or not quantity:
                self.fail(f"{item!r} is not NAME=QUANTITY (e.g. memory=256Mi), or none", param, ctx)
            out[name] = quantity
        return out


def deployment_options(function: F) -> F:
    """``--image``, ``--command``, ``--replicas``, ``--without-webhooks``, ``--ca-file``,
    ``--requests``, ``--limits``."""
    options = [
        click.option("--image", help="Container image; adds the operator Deployment."),
        click.option(
            "--command",
            type=_CommandType(),
            help='Quoted container command before "run" (split like a shell, never run by one).',
        ),
        click.option(
            "--replicas",
            type=click.IntRange(min=1),
            default=1,
            show_default=True,
            help="Deployment replicas (configure leader election or sharding for more than one).",
        ),
        click.option(
            "--without-webhooks",
            is_flag=True,
            help="Leave out the webhook Service and registrations (CRDs and RBAC only).",
        ),
        click.option(
            "--ca-file",
            envvar=CA_ENV,
            type=click.Path(dir_okay=False),
            help=f"PEM CA certificate for webhook registrations (or ${CA_ENV}).",
        ),
        click.option(
            "--requests",
            type=_ResourcesType(),
            help="Container resource requests, replacing cpu=100m,memory=128Mi (or none).",
        ),
        click.option(
            "--limits",
            type=_ResourcesType(),
            help="Container resource limits, replacing memory=512Mi (or none).",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return extra_options(function)


def manifest_options(webhook: WebhookServer | None, params: Mapping[str, Any]) -> ManifestOptions:
    """The deployment flags as one `ManifestOptions` (checked there); ``click.UsageError``/
    ``click.BadParameter`` (exit 2) for a bad invocation. ``webhook``: the operator's (None: it
    has none), for ``--ca-file``."""
    from cloudcoil_sync.application._internal.options import ManifestOptions, OptionError

    ca_bundle = _read_ca(webhook, params.get("ca_file"))
    try:
        return ManifestOptions(
            image=params.get("image"),
            command=params.get("command"),
            replicas=params.get("replicas", 1),
            include_webhooks=not params.get("without_webhooks", False),
            ca_bundle=ca_bundle,
            requests=params.get("requests"),
            limits=params.get("limits"),
            extras=extras_from(params),
        )
    except OptionError as error:
        raise usage_error(error) from None


def _read_ca(webhook: WebhookServer | None, path: str | None) -> bytes | None:
    if not path:
        return None
    ctx = click.get_current_context(silent=True)
    from_env = (
        ctx is not None and ctx.get_parameter_source("ca_file") == ParameterSource.ENVIRONMENT
    )
    hint = f"--ca-file (from {CA_ENV})" if from_env else "--ca-file"
    if webhook is None:
        raise click.UsageError(f"{hint} requires a webhook server")
    try:
        with open(path, "rb") as stream:
            data = stream.read()
    except OSError as exc:
        raise click.BadParameter(f"cannot read {path}: {exc.strerror}", param_hint=hint) from None
    from cloudcoil_sync.application._internal.options import certificates_only

    if not certificates_only(data):
        raise click.BadParameter(f"{path} contains no PEM certificate", param_hint=hint)
    return data


def run_options(function: F) -> F:
    """``--log-level`` and ``--log-format`` (also from CLOUDCOIL_LOG_LEVEL/_FORMAT)."""
    level = click.option(
        "--log-level",
        envvar="CLOUDCOIL_LOG_LEVEL",
        type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], case_sensitive=False),
        default="INFO",
        show_default=True,
    )
    fmt = click.option(
        "--log-format",
        envvar="CLOUDCOIL_LOG_FORMAT",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
    )
    return level(fmt(function))


def operation_options(what: str, dry_run_help: str) -> Callable[[F], F]:
    """``--timeout``, ``--dry-run`` and ``--quiet``, shared by ``install`` and ``uninstall``."""

    def decorate(function: F) -> F:
        options = [
            click.option(
                "--timeout",
                type=click.FloatRange(min=0, min_open=True),
                default=120.0,
                show_default=True,
                help=f"Seconds for the whole {what}.",
            ),
            click.option("--dry-run", is_flag=True, help=dry_run_help),
            click.option("--quiet", "-q", is_flag=True, help="No progress lines on stderr."),
        ]
        for option in reversed(options):
            function = option(function)
        return function

    return decorate


def run_operation(
    operation: Callable[..., Sequence[Any]],
    app: Operator,
    params: Mapping[str, Any],
    **keywords: Any,
) -> None:
    """``install``/``uninstall`` of ``app``'s definition with the `operation_options` in
    ``params`` and the command's own ``keywords``: failures as one line; with ``--dry-run``,
    print each outcome's ``dry_run_line()``."""
    from cloudcoil_sync.application._internal.progress import Operation, Progress

    timeout, dry_run = params["timeout"], params["dry_run"]
    if not math.isfinite(timeout):
        raise click.BadParameter("must be finite", param_hint="--timeout")
    steps = Operation(timeout, dry_run, app.config, Progress(quiet=params["quiet"]))
    with command_errors():
        results = operation(app.definition(), operation=steps, **keywords)
    if dry_run:
        for result in results:
            click.echo(result.dry_run_line())


def manifests_command(app: Operator) -> click.Command:
    """``manifests``: print the install documents as YAML, offline."""

    @click.command(
        "manifests",
        help="Print CRDs, RBAC, Service, Deployment and webhook registrations as YAML (offline).",
    )
    @deployment_options
    @click.option(
        "--split",
        "split",
        type=click.Path(file_okay=False),
        help="Write one file per object and a kustomization.yaml into this directory.",
    )
    def manifests(split: str | None, **params: Any) -> None:
        import yaml

        from cloudcoil_sync.application._internal.manifests import assemble

        options = manifest_options(app.webhook, params)
        with command_errors():
            documents = assemble(app.definition(), options)
        if split is not None:
            from cloudcoil_sync.application._internal.layout import write_split

            try:
                written = write_split(documents, split)
            except OSError as exc:
                raise click.ClickException(f"cannot write {split}: {exc.strerror}") from None
            click.echo(f"wrote {len(written)} files to {split}", err=True)
            return
        click.echo(yaml.safe_dump_all(documents, sort_keys=False), nl=False)

    return manifests


class OperatorGroup(click.Group):
    """The command group of one Application; runtime commands load lazily."""

    def __init__(self, app: Operator, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.app = app

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(["manifests", *COMMAND_MODULES])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name == "manifests":
            return manifests_command(self.app)
        module_name = COMMAND_MODULES.get(cmd_name)
        if module_name is None:
            return None
        factory: Callable[[Operator], click.Command] = importlib.import_module(module_name).command
        return factory(self.app)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Run; errors become one ``Error:`` line on stderr and a non-zero exit status."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:
            click.echo(exc.ctx.get_help() if exc.ctx else "", err=True)
            sys.exit(USAGE_EXIT)
        except click.ClickException as exc:
            fail(exc.format_message(), exc.exit_code)
        except click.Abort:
            fail("Aborted", 1)
        except BrokenPipeError:
            # The reader went away (``manifests | head``): exit quietly, without Python's
            # "Exception ignored" note when it flushes stdout at exit.
            with contextlib.suppress(OSError, ValueError, AttributeError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(1)
        if isinstance(code, int) and code:
            sys.exit(code)
        return None


def build_cli(app: Operator) -> OperatorGroup:
    """The click group for ``app`` (use with ``click.testing.CliRunner``)."""
    return OperatorGroup(app, help=f"Manage the {app.name} operator.")


def main(app: Operator, argv: Sequence[str] | None = None) -> None:
    """Parse ``argv`` (default ``sys.argv[1:]``) and run the command; exits non-zero on error."""
    # Models and definitions imported so far live as long as the process: move them out of
    # the collector's sight, so later collections (and the one at exit) do not rescan them.
    gc.freeze()
    build_cli(app).main(args=None if argv is None else list(argv))
