"""Running a webhook operator outside a Pod: where its TLS files are and where it listens.

``run --tls-dir DIR --webhook-host HOST --webhook-port PORT`` (or ``CLOUDCOIL_TLS_DIR``,
``CLOUDCOIL_WEBHOOK_HOST``, ``CLOUDCOIL_WEBHOOK_PORT``) replace the ``WebhookServer``'s
``certfile``/``keyfile`` (``DIR/tls.crt``, ``DIR/tls.key``), ``host`` and ``port`` for this run
(``Application.replace_webhook`` takes the result); the generated manifests are not affected.
``certs`` (``certs_cli.py``) writes such a directory.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click
from click.core import ParameterSource

if TYPE_CHECKING:
    from cloudcoil_sync.application._internal.settings import WebhookServer

__all__ = ["TLS_FILES", "local_webhook", "webhook_options"]

F = TypeVar("F", bound=Callable[..., Any])
#: File names in a TLS directory, as in a kubernetes.io/tls Secret.
TLS_FILES = ("tls.crt", "tls.key")
_OPTIONS = {
    "tls_dir": ("--tls-dir", "CLOUDCOIL_TLS_DIR"),
    "webhook_host": ("--webhook-host", "CLOUDCOIL_WEBHOOK_HOST"),
    "webhook_port": ("--webhook-port", "CLOUDCOIL_WEBHOOK_PORT"),
}


def webhook_options(function: F) -> F:
    """``--tls-dir``, ``--webhook-host`` and ``--webhook-port`` (also from the environment)."""
    options = [
        click.option(
            "--tls-dir",
            envvar="CLOUDCOIL_TLS_DIR",
            type=click.Path(file_okay=False),
            help="Directory holding tls.crt and tls.key for the webhook server "
            "(instead of the WebhookServer's certfile/keyfile).",
        ),
        click.option(
            "--webhook-host",
            envvar="CLOUDCOIL_WEBHOOK_HOST",
            help="Address the webhook server binds (for example 127.0.0.1).",
        ),
        click.option(
            "--webhook-port",
            envvar="CLOUDCOIL_WEBHOOK_PORT",
            type=click.IntRange(1, 65535),
            help="Port the webhook server listens on.",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def local_webhook(
    webhook: WebhookServer | None,
    *,
    tls_dir: str | None,
    webhook_host: str | None,
    webhook_port: int | None,
) -> WebhookServer | None:
    """``webhook`` with the flags applied (None if none was given or the operator has no
    webhook server); ``click.UsageError`` for flags it cannot take."""
    given = {"tls_dir": tls_dir, "webhook_host": webhook_host, "webhook_port": webhook_port}
    given = {key: value for key, value in given.items() if value is not None}
    if not given:
        return None
    if webhook is None:
        flags = [name for name in given if not _from_environment(name)]
        if flags:  # variables set for another operator are not an error here
            raise click.UsageError(f"{_OPTIONS[flags[0]][0]} requires a WebhookServer")
        return None
    changes: dict[str, Any] = {}
    if tls_dir is not None:
        paths = [os.path.join(tls_dir, name) for name in TLS_FILES]
        for path in paths:
            if not os.access(path, os.R_OK):
                raise click.BadParameter(f"cannot read {path}", param_hint=_hint("tls_dir"))
        changes.update(certfile=paths[0], keyfile=paths[1])
    if webhook_host is not None:
        if not webhook_host.strip():
            raise click.BadParameter("must not be empty", param_hint=_hint("webhook_host"))
        changes["host"] = webhook_host
    if webhook_port is not None:
        changes["port"] = webhook_port
    return dataclasses.replace(webhook, **changes)


def _from_environment(name: str) -> bool:
    ctx = click.get_current_context(silent=True)
    return ctx is not None and ctx.get_parameter_source(name) == ParameterSource.ENVIRONMENT


def _hint(name: str) -> str:
    flag, variable = _OPTIONS[name]
    return f"{flag} (from {variable})" if _from_environment(name) else flag
