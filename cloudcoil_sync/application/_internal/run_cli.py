"""The ``run`` command: run the operator until SIGINT/SIGTERM, then stop and exit 0.

Signal handlers are installed only here (``app.run`` installs none) and the previous ones
are restored afterwards. A second signal while stopping exits at once. Losing leadership
exits non-zero so the Pod restarts; every failure is one ``Error:`` line.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import click

from cloudcoil_sync._internal import logs
from cloudcoil_sync.application._internal.cli import DefinitionError, Operator, fail, run_options
from cloudcoil_sync.application._internal.local import local_webhook, webhook_options
from cloudcoil_sync.controller import LeadershipLost

__all__ = ["command", "stop_on_signals"]

log = logging.getLogger("cloudcoil_sync.application")

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """Set `stop` on SIGINT/SIGTERM (a second one exits at once); restore handlers after."""

    def handle(signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if stop.is_set():
            log.warning("Received %s again; exiting without waiting for the drain", name)
            os._exit(128 + signum)
        stop.set()  # first: no pass starts from here on, not after the log line's I/O
        log.info("Received %s; stopping gracefully (send it again to exit at once)", name)

    previous = {signum: signal.signal(signum, handle) for signum in SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def command(app: Operator) -> click.Command:
    """The ``run`` command of `app`."""

    @click.command("run", help="Run the operator (kubeconfig or in-cluster) until SIGTERM.")
    @run_options
    @webhook_options
    def run(log_level: str, log_format: str, **flags: Any) -> None:
        webhook = local_webhook(app.webhook, **flags)
        if webhook is not None:
            app.replace_webhook(webhook)
        logs.configure(log_level, log_format)
        try:
            app.validate_definition()
        except (ValueError, TypeError) as error:
            raise DefinitionError(str(error)) from None
        _check_tls_files(app)
        stop = threading.Event()
        try:
            with stop_on_signals(stop):
                app.run(stop=stop)
        except LeadershipLost as error:
            fail(f"{error}; exiting so that the operator restarts")
        except BaseExceptionGroup as group:
            log.debug("Operator failed", exc_info=group)
            fail("; ".join(_describe(error) for error in group.exceptions))
        except Exception as error:
            log.debug("Operator failed", exc_info=error)
            fail(_describe(error))
        log.info("Operator %s stopped", app.name)

    return run


def _check_tls_files(app: Operator) -> None:
    """A missing serving certificate, explained: where it comes from and how to get one."""
    webhook = app.webhook
    if webhook is None:
        return
    missing = [path for path in (webhook.certfile, webhook.keyfile) if not os.path.isfile(path)]
    if not missing:
        return
    ctx = click.get_current_context(silent=True)
    program = ctx.find_root().command_path if ctx is not None else "python app.py"
    fail(
        f"Webhook TLS file does not exist: {missing[0]}. In a cluster the Deployment mounts "
        f"Secret {webhook.tls_secret!r} there (cert-manager or your own CA writes it). "
        f"Outside a cluster, write a development set with '{program} certs --dir tls' and "
        f"run with '{program} run --tls-dir tls --webhook-host 127.0.0.1' "
        "(or set CLOUDCOIL_TLS_DIR)"
    )


def _describe(error: BaseException) -> str:
    text = str(error)
    if isinstance(error, LeadershipLost):
        return text
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
