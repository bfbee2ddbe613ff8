"""``certs``: a development CA and a serving certificate for running webhooks locally.

Writes ``ca.crt`` (for ``install --ca-file``), ``tls.crt`` and ``tls.key`` (for ``run
--tls-dir``) into a directory. The certificate covers the names kube-apiserver verifies for the
webhook Service (``<app>.<namespace>.svc`` and its longer forms), ``localhost`` and 127.0.0.1.
The CA's key is not written: issue a new set rather than extending this one. For development
only: in a cluster use cert-manager or your own CA.
"""

from __future__ import annotations

import os

import click

from cloudcoil_sync.application._internal.cli import Operator
from cloudcoil_sync.application._internal.local import TLS_FILES

__all__ = ["command", "service_names", "write_certificates"]


def service_names(name: str, namespace: str) -> tuple[str, ...]:
    """DNS names of the webhook Service, the one kube-apiserver checks first."""
    return (
        f"{name}.{namespace}.svc",
        f"{name}.{namespace}.svc.cluster.local",
        f"{name}.{namespace}",
        name,
    )


def write_certificates(folder: str, hosts: tuple[str, ...], *, force: bool = False) -> list[str]:
    """Write ``ca.crt``, ``tls.crt`` and ``tls.key`` (owner-only) for ``hosts``; their paths.

    ``FileExistsError`` if any exists and not ``force``.
    """
    from cloudcoil_sync._internal.certificates import CertificateAuthority

    paths = [os.path.join(folder, name) for name in ("ca.crt", *TLS_FILES)]
    existing = [path for path in paths if os.path.exists(path)]
    if existing and not force:
        raise FileExistsError(f"{existing[0]} exists (pass --force to replace it)")
    os.makedirs(folder, exist_ok=True)
    ca = CertificateAuthority("cloudcoil-sync-development-ca")
    serving = ca.issue(hosts, cache=False)
    for path, data, mode in zip(
        paths, (ca.cert_pem, serving.cert_pem, serving.key_pem), (0o644, 0o644, 0o600), strict=True
    ):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
        os.chmod(path, mode)
    return paths


def command(app: Operator) -> click.Command:
    """``certs [--dir DIR] [--host NAME]... [--force]``."""

    @click.command(
        "certs", help="Write a development CA and webhook serving certificate (local runs)."
    )
    @click.option(
        "--dir",
        "folder",
        type=click.Path(file_okay=False),
        default="tls",
        show_default=True,
        help="Directory for ca.crt, tls.crt and tls.key.",
    )
    @click.option("--host", "hosts", multiple=True, help="Another DNS name or IP to cover.")
    @click.option("--force", is_flag=True, help="Replace existing files.")
    def certs(folder: str, hosts: tuple[str, ...], force: bool) -> None:
        if app.webhook is None:
            raise click.UsageError("certs requires a WebhookServer (this operator has none)")
        names = (*service_names(app.name, app.namespace), "localhost", "127.0.0.1", *hosts)
        try:
            ca, cert, _ = write_certificates(folder, tuple(dict.fromkeys(names)), force=force)
        except FileExistsError as exc:
            raise click.ClickException(str(exc)) from None
        except OSError as exc:
            raise click.ClickException(f"cannot write to {folder}: {exc.strerror}") from None
        click.echo(f"wrote {ca}, {cert} and its key for {names[0]}", err=True)
        click.echo(
            f"install with --ca-file {ca}; run with --tls-dir {folder} --webhook-host 127.0.0.1",
            err=True,
        )

    return certs
